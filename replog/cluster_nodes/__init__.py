"""What `replog cluster` (replog/cluster_control.py) builds on: the cluster.json model (manifest.py), the
plan of a new cluster's ports, properties and command lines (plan.py), and launching, stopping and waiting on
its node processes (nodes.py)."""
