"""A busy topic beside an idle one (issue 18): RF=3 acks=all produce into a 3-partition topic, alone and then
beside an idle 1,000-partition RF=3 topic on the same 3-broker cluster, with incremental fetch sessions
(KIP-227, the default) and without them (`max.incremental.fetch.session.cache.slots=0`: every follower fetch
names and answers every partition it follows).

Each round starts a fresh cluster per setting: the busy topic is measured alone, then the idle topic is created
and, once the brokers have applied it, the busy topic is measured again. The ratio is beside / alone of the
same cluster; CPU-s/GiB is the three brokers' CPU time per GiB of values produced. Rounds alternate the two
settings, so a drift of a shared machine hits both alike.
"""

import asyncio
import os
from pathlib import Path

from .harness import GiB, MiB, Result, Stats, cpu_seconds, replicated_cluster
from .partition_scaling import round_robin_assignment
from .replicated_produce import LAYOUTS, VALUE_BYTES, produce

NAME = "idle-neighbours"
BUSY, IDLE = "busy", "idle"
SETTLE_S = 2.0  # after the LeaderAndIsr is applied: fetchers start and the ISR settles
SETTINGS = {"sessions": {}, "full fetches": {"max.incremental.fetch.session.cache.slots": "0"}}


async def measure(cluster, value: bytes, count: int) -> tuple[float, float]:
    """(value bytes per second, broker CPU-seconds per GiB of values) of one produce into the busy topic."""
    pids = [broker.proc.pid for broker in cluster.brokers.values()]
    before = cpu_seconds(pids)
    # Producing blocks, and the controller in this loop must keep answering the brokers meanwhile.
    seconds = await asyncio.to_thread(produce, cluster.bootstrap, BUSY, value, count)
    volume = count * len(value)
    return volume / seconds, (cpu_seconds(pids) - before) / (volume / GiB)


async def neighbours_round(root: Path, overrides: dict[str, str], idle_partitions: int, value: bytes,
                           count: int) -> dict[str, tuple[float, float]]:
    async with replicated_cluster(root, overrides) as cluster:
        assignment, configs = LAYOUTS["RF=3"]
        await cluster.controller.create_topic(BUSY, assignment, configs)
        await asyncio.to_thread(produce, cluster.bootstrap, BUSY, value, count // 4)  # warm-up, discarded
        alone = await measure(cluster, value, count)
        await cluster.controller.create_topic(IDLE, round_robin_assignment(idle_partitions),
                                              {"min.insync.replicas": "2"})
        await cluster.controller.settle()
        await asyncio.sleep(SETTLE_S)
        beside = await measure(cluster, value, count)
    return {"alone": alone, "beside": beside}


def run(quick: bool, workdir: Path) -> list[Result]:
    idle_partitions, volume, rounds = (100, 8 * MiB, 1) if quick else (1_000, 128 * MiB, 3)
    value = os.urandom(VALUE_BYTES)
    samples: dict[str, list[dict[str, tuple[float, float]]]] = {setting: [] for setting in SETTINGS}
    for round_number in range(rounds):
        for setting, overrides in SETTINGS.items():
            root = workdir / f"neighbours-{setting.replace(' ', '-')}-{round_number}"
            samples[setting].append(asyncio.run(
                neighbours_round(root, overrides, idle_partitions, value, volume // VALUE_BYTES)))
    results = []
    for setting, rounds_ in samples.items():
        alone = Stats.of([r["alone"][0] for r in rounds_])
        beside = Stats.of([r["beside"][0] for r in rounds_])
        extra = {"idle_partitions": idle_partitions, "rounds": rounds, "run_bytes": volume,
                 "alone_cpu_s_per_gib": [round(r["alone"][1], 2) for r in rounds_],
                 "beside_cpu_s_per_gib": [round(r["beside"][1], 2) for r in rounds_]}
        results.append(Result(NAME, f"RF=3 3-partition topic beside an idle {idle_partitions:,}-partition topic, "
                                    f"{setting}", "B/s", beside, "the same topic alone, same cluster",
                              alone.median, extra))
        results.append(Result(NAME, f"CPU beside an idle {idle_partitions:,}-partition topic, {setting}",
                              "CPU-s/GiB", Stats.of([r["beside"][1] for r in rounds_]), "alone, same cluster",
                              Stats.of([r["alone"][1] for r in rounds_]).median, extra))
    return results
