"""replog's benchmarks: `python -m benchmarks [--quick] [--only NAME]`.

Every headline figure is a ratio to a baseline measured in the same run, because these VMs drift by about
±15% from run to run (see /work/shared/reference/machine-and-ecosystem-facts.md).
"""
