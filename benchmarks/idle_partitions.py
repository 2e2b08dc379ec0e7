"""What one idle broker costs per partition it hosts, and how much of that is its metrics dump.

A single broker (Kafka's replication defaults, the metrics dump at its default metrics.dump.interval.ms of
1 s) hosts 1,000 or 10,000 RF=1 partitions and is left alone for IDLE_S after they settle; its CPU over that
window (all threads, /proc schedstat) is the figure. Issue 18's target is at most 0.05 core at 10,000
partitions. No replication: the partition-scaling benchmark measures three RF=3 brokers; this one isolates
the per-partition work a broker does on its own (the metrics dump, checkpoints, ISR and retention checks).

Baseline: the same broker in the same run with metrics.dump.interval.ms=0 (no dump), so the ratio shows what
the dump adds. The topics are created 1,000 partitions at a time: one 10,000-partition LeaderAndIsr takes
longer than the controller's request timeout on a loaded 2-vCPU VM (the controller-scale work's subject).
"""

import asyncio
import shutil
from pathlib import Path

from .harness import KAFKA_REPLICATION_DEFAULTS, KAFKA_SESSION_TIMEOUT_MS, Result, Stats, thread_cpu_seconds

NAME = "idle-partitions"
IDLE_S, QUICK_IDLE_S = 10.0, 2.0
# After the last LeaderAndIsr: the first dumps (every line new, one a second) are written before the window.
SETTLE_S, QUICK_SETTLE_S = 3.0, 1.5
QUICK_PARTITIONS = 300  # CI's smoke test: its figure is not quoted
TOPIC_PARTITIONS = 1_000
DUMPS_OFF = {"metrics.dump.interval.ms": "0"}


async def idle_round(root: Path, partitions: int, overrides: dict[str, str], idle_s: float, settle_s: float) -> float:
    """One broker's CPU, in cores, while idle with `partitions` RF=1 partitions."""
    from replog.harness.local_cluster import LocalCluster

    cluster = LocalCluster(root, brokers=1, overrides=KAFKA_REPLICATION_DEFAULTS | overrides,
                           session_timeout_ms=KAFKA_SESSION_TIMEOUT_MS)
    loop = asyncio.get_running_loop()
    try:
        await cluster.start()
        (broker_id,) = cluster.brokers
        for first in range(0, partitions, TOPIC_PARTITIONS):
            count = min(TOPIC_PARTITIONS, partitions - first)
            await cluster.create_topic(f"idle-{first}", {p: [broker_id] for p in range(count)}, {})
            await cluster.controller.settle()
        await asyncio.sleep(settle_s)
        pids = [broker.proc.pid for broker in cluster.brokers.values()]
        before, started = thread_cpu_seconds(pids), loop.time()
        await asyncio.sleep(idle_s)
        return (thread_cpu_seconds(pids) - before) / (loop.time() - started)
    finally:
        await cluster.stop()
        shutil.rmtree(root, ignore_errors=True)  # 10,000 log dirs: their page cache is better freed


def run(quick: bool, workdir: Path) -> list[Result]:
    # Rounds interleave dumps on and off, so a drift of the shared VM hits both alike. Quick mode (CI's
    # smoke test) creates a few hundred: 10,000 partitions twice take minutes on a 2-vCPU VM.
    counts, rounds = ((QUICK_PARTITIONS,), 1) if quick else ((1_000, 10_000), 3)
    idle_s, settle_s = (QUICK_IDLE_S, QUICK_SETTLE_S) if quick else (IDLE_S, SETTLE_S)
    results = []
    for partitions in counts:
        with_dumps, without = [], []
        for round_number in range(rounds):
            for samples, overrides, label in ((with_dumps, {}, "dumps"), (without, DUMPS_OFF, "no-dumps")):
                root = workdir / f"idle-{partitions}-{label}-{round_number}"
                samples.append(asyncio.run(idle_round(root, partitions, overrides, idle_s, settle_s)))
        off = Stats.of(without)
        extra = {"partitions": partitions, "idle_s": idle_s, "rounds": rounds, "dumps_off_cpu": off.samples}
        results.append(Result(NAME, f"idle broker CPU, {partitions:,} RF=1 partitions, metrics dump on",
                              "CPU-s/s", Stats.of(with_dumps), "same broker, dump off", off.median, extra))
    return results
