"""Processes for the tests, the demo, chaos and the benchmarks: BrokerProcess, LocalCluster, TcpProxy and
the helpers that launch a node, wait until it serves and stop it.

The harness imports the product, never chaos/, benchmarks/, the demo or the CLI: they all build on it.
"""
