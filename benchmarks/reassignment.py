"""Partition reassignment (KIP-455) on a 4-broker cluster with Kafka's replication defaults: the time to move a
partition (1 GiB full, 16 MiB quick) to a new broker without a throttle and with one, and acks=all produce p99
to another partition on the same brokers during each move against before it, in the same run.

The partition ("moving", replicas [1, 2]) first moves to [3, 2] unthrottled, then to [4, 2] with the
throttle (50 MB/s full, 5 MB/s quick), set as `replog reassign --execute --throttle` sets it: both rates on
every broker involved, the current replicas as leader-throttled, the new one as follower-throttled. The clock
runs from the AlterPartitionReassignments answer to the controller recording the completion (polled every
5 ms). A probe produces 100-byte records with acks=all, one at a time, to "probe" (replicas [1, 3]: the
moving partition's leader and newcomer in the first move, its leader in the second).

Kafka's throttle measures its rate over 11 windows of a second, counting at least 10 s: a move shorter than
that goes through at full speed, a longer one averages the rate at most (bytes moved by time T <= rate x
max(T, 10 s)), so the time at the rate, bytes / rate, is reported beside it. The quick run keeps 2 windows
(a 1 s span), or its small move would fit in the burst.
"""

import asyncio
import os
import threading
import time
from pathlib import Path

import confluent_kafka

from replog.client import cluster_admin
from replog.client.admin import Admin
from replog.harness.local_cluster import LocalCluster

from .harness import KAFKA_REPLICATION_DEFAULTS, KAFKA_SESSION_TIMEOUT_MS, MiB, Result, Stats, percentile

NAME = "reassignment"
TOPIC, PROBE_TOPIC = "moving", "probe"
VALUE_BYTES = 1024
POLL_INTERVAL_S = 0.005
MOVE_TIMEOUT_S = 900.0
PROBE_BEFORE_S, QUICK_PROBE_BEFORE_S = 3.0, 1.0  # quick: still hundreds of one-at-a-time probes
# replication.quota.window.num (windows of 1 s): Kafka's default in the full run; 2 in the quick one, whose
# small move would otherwise fit in the burst.
FULL_QUOTA_WINDOWS, QUICK_QUOTA_WINDOWS = 11, 2


def fill(bootstrap: str, volume: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                                         "batch.size": 1_000_000, "compression.type": "none",
                                         "queue.buffering.max.kbytes": 256 * 1024})  # fmt: skip
    value = os.urandom(VALUE_BYTES)
    for _ in range(volume // VALUE_BYTES):
        while True:
            try:
                producer.produce(TOPIC, value, partition=0)
                break
            except BufferError:
                producer.poll(0.005)
    if remaining := producer.flush(300):
        raise RuntimeError(f"confluent-kafka: {remaining} records undelivered")


class Probe:
    """acks=all produce latencies, one record in flight, in a thread (the controller owns the event loop)."""

    def __init__(self, bootstrap: str) -> None:
        self.latencies: list[float] = []
        self._stop = threading.Event()
        self._producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        value = b"p" * 100
        while not self._stop.is_set():
            started = time.perf_counter()
            self._producer.produce(PROBE_TOPIC, value, partition=0)
            if self._producer.flush(30) == 0:
                self.latencies.append(time.perf_counter() - started)
            time.sleep(0.01)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def log_bytes(cluster: LocalCluster, node_id: int) -> int:
    return sum(p.stat().st_size for p in cluster.log_dir(node_id, TOPIC, 0).glob("*.log"))


async def set_throttle(admin: Admin, current: tuple[int, ...], target: tuple[int, ...], rate: int) -> None:
    leader_side = ",".join(f"0:{b}" for b in current)
    follower_side = ",".join(f"0:{b}" for b in target if b not in current)
    await cluster_admin.alter_configs(admin, cluster_admin.TOPIC, TOPIC, delete_configs=(), set_configs={
        "leader.replication.throttled.replicas": leader_side,
        "follower.replication.throttled.replicas": follower_side})
    for broker in sorted(set(current) | set(target)):
        await cluster_admin.alter_configs(admin, cluster_admin.BROKER, str(broker), delete_configs=(), set_configs={
            "leader.replication.throttled.rate": str(rate), "follower.replication.throttled.rate": str(rate)})


async def move(cluster: LocalCluster, admin: Admin, probe: Probe, target: tuple[int, ...],
               probe_before_s: float) -> dict:
    """Reassign the partition to `target`; the seconds it took, and the probe's p99 before and during."""
    before_from = len(probe.latencies)
    await asyncio.sleep(probe_before_s)
    before = sorted(probe.latencies[before_from:])
    during_from = len(probe.latencies)
    answers = await cluster_admin.alter_partition_reassignments(admin, {(TOPIC, 0): target})
    started = time.perf_counter()
    assert answers[(TOPIC, 0)][0] == 0, answers
    deadline = started + MOVE_TIMEOUT_S
    while True:
        p = cluster.controller.registration(TOPIC, 0)
        if p.replicas == target and not p.is_reassigning:
            break
        if time.perf_counter() > deadline:
            raise TimeoutError(f"the move to {target} did not finish in {MOVE_TIMEOUT_S} s")
        await asyncio.sleep(POLL_INTERVAL_S)
    seconds = time.perf_counter() - started
    during = sorted(probe.latencies[during_from:])
    return {"seconds": seconds, "moved_bytes": log_bytes(cluster, target[0]),
            "p99_before_s": percentile(before, 0.99) if before else None,
            "p99_during_s": percentile(during, 0.99) if during else None, "probes_during": len(during)}


async def measure(root: Path, volume: int, throttle: int, windows: int,
                  probe_before_s: float) -> tuple[dict, dict]:
    cluster = LocalCluster(root, brokers=4, overrides={**KAFKA_REPLICATION_DEFAULTS,
                                                       "replication.quota.window.num": str(windows)},
                           session_timeout_ms=KAFKA_SESSION_TIMEOUT_MS)
    await cluster.start()
    try:
        await cluster.controller.create_topic(TOPIC, {0: [1, 2]}, {"min.insync.replicas": "1"})
        await cluster.controller.create_topic(PROBE_TOPIC, {0: [1, 3]}, {"min.insync.replicas": "2"})
        await asyncio.to_thread(fill, cluster.brokers[1].bootstrap, volume)
        # acks=1: broker 2 may still be copying; "before" must be a quiet cluster.
        deadline = time.perf_counter() + MOVE_TIMEOUT_S
        while log_bytes(cluster, 2) < log_bytes(cluster, 1):
            if time.perf_counter() > deadline:
                raise TimeoutError("broker 2 did not catch up with the filled partition")
            await asyncio.sleep(POLL_INTERVAL_S)
        probe = Probe(cluster.bootstrap)
        probe.start()
        try:
            async with Admin(cluster.bootstrap) as admin:
                unthrottled = await move(cluster, admin, probe, (3, 2), probe_before_s)
                await set_throttle(admin, (3, 2), (4, 2), throttle)
                throttled = await move(cluster, admin, probe, (4, 2), probe_before_s)
        finally:
            await asyncio.to_thread(probe.stop)
        return unthrottled, throttled
    finally:
        await cluster.stop()


def run(quick: bool, workdir: Path) -> list[Result]:
    volume = (16 if quick else 1024) * MiB  # quick: 3.4 s at the throttle, past the 2 windows' burst
    throttle = (5 if quick else 50) * 1_000_000
    windows = QUICK_QUOTA_WINDOWS if quick else FULL_QUOTA_WINDOWS
    probe_before_s = QUICK_PROBE_BEFORE_S if quick else PROBE_BEFORE_S
    unthrottled, throttled = asyncio.run(measure(workdir / "reassignment", volume, throttle, windows, probe_before_s))
    at_rate_s = throttled["moved_bytes"] / throttle
    return [
        Result(NAME, f"move {volume // MiB} MiB, no throttle", "ms", Stats.of([1000 * unthrottled["seconds"]]),
               f"with the {throttle // 1_000_000} MB/s throttle", 1000 * throttled["seconds"], unthrottled),
        Result(NAME, f"move {volume // MiB} MiB, {throttle // 1_000_000} MB/s throttle", "ms",
               Stats.of([1000 * throttled["seconds"]]), "bytes moved / throttle", 1000 * at_rate_s,
               throttled),
        Result(NAME, "acks=all produce p99 during the unthrottled move", "ms",
               Stats.of([1000 * unthrottled["p99_during_s"]]), "p99 before it",
               1000 * unthrottled["p99_before_s"], {}),
        Result(NAME, "acks=all produce p99 during the throttled move", "ms",
               Stats.of([1000 * throttled["p99_during_s"]]), "p99 before it", 1000 * throttled["p99_before_s"], {}),
    ]
