"""Follower catch-up after a restart, on a 3-broker cluster with Kafka's replication defaults.

Broker 3 follows two partitions led by brokers 1 and 2. Each round starts a cluster, replicates a 16 MiB
warm-up, SIGKILLs broker 3, produces a backlog (32 MiB quick, 1 GiB full) of 1 KiB values with acks=1 to the
leaders, starts broker 3 again and then registers it with the controller, which hands it its partitions;
the clock runs from that registration until the sum of broker 3's segment file sizes equals the leaders'
(the replicas hold the same batches). The figure is log bytes copied per second (one fetcher per leader,
replica.fetch.max.bytes 1 MiB per partition: Kafka's defaults), divided by raw os.sendfile of a page-cached
file of the backlog's size to a loopback socket, measured in the same run. Beside it, the CPU-seconds per
GiB copied of the follower and of the two leaders, over the same window.
"""

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path

import confluent_kafka

from replog.harness.local_cluster import LocalCluster

from .baselines import discard_server, page_cached_file, sendfile_to_loopback
from .harness import GiB, MiB, Result, Stats, cpu_seconds, repeat, replicated_cluster

NAME = "follower-catchup"
TOPIC = "catch-up"
FOLLOWER = 3
ASSIGNMENT = {0: [1, 2, FOLLOWER], 1: [2, 1, FOLLOWER]}  # leaders first
VALUE_BYTES = 1024
POLL_INTERVAL_S = 0.005  # the follower is another process: watch its files this often
CATCH_UP_TIMEOUT_S = 600.0
ROUNDS = 3


def produce_backlog(bootstrap: str, volume: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                                         "batch.size": 1_000_000, "compression.type": "none",
                                         "queue.buffering.max.kbytes": 256 * 1024})  # fmt: skip
    value = os.urandom(VALUE_BYTES)
    for i in range(volume // VALUE_BYTES):
        while True:
            try:
                producer.produce(TOPIC, value, partition=i % len(ASSIGNMENT))
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.005)
    if remaining := producer.flush(120):
        raise RuntimeError(f"confluent-kafka: {remaining} backlog records undelivered")


def segment_bytes(cluster: LocalCluster, node_id: int, partition: int) -> int:
    return sum(path.stat().st_size for path in cluster.log_dir(node_id, TOPIC, partition).glob("*.log"))


def follower_bytes(cluster: LocalCluster) -> int:
    return sum(segment_bytes(cluster, FOLLOWER, partition) for partition in ASSIGNMENT)


def leader_bytes(cluster: LocalCluster) -> int:
    return sum(segment_bytes(cluster, replicas[0], p) for p, replicas in ASSIGNMENT.items())


@dataclass(frozen=True)
class Round:
    bytes_per_s: float
    follower_start_s: float
    follower_cpu_s_per_gib: float
    leaders_cpu_s_per_gib: float


async def catch_up_round(root: Path, volume: int, warmup_volume: int) -> Round:
    """One fresh cluster (its directory deleted afterwards, so that rounds do not pile up page cache, which
    this kind of VM's memory reclaim makes slower to write): a warm-up replicated with every broker up, then
    stop, backlog, restart; returns bytes copied per second, the seconds the follower took to start, and
    the CPU the follower and the leaders spent per GiB copied."""
    async with replicated_cluster(root) as cluster:
        await cluster.controller.create_topic(TOPIC, ASSIGNMENT, {"min.insync.replicas": "2"})
        leaders = ",".join(cluster.brokers[replicas[0]].bootstrap for replicas in ASSIGNMENT.values())
        # Blocking clients run in a thread: the controller in this loop must keep answering the brokers.
        await asyncio.to_thread(produce_backlog, leaders, warmup_volume)
        await wait_caught_up(cluster, leader_bytes(cluster))
        # A clean stop ends the follower's session, so the restarted process registers at once (after a
        # SIGKILL it would first wait out broker.session.timeout.ms, which is not catch-up time).
        await asyncio.to_thread(cluster.brokers[FOLLOWER].stop)
        await asyncio.to_thread(produce_backlog, leaders, volume)
        target = leader_bytes(cluster)
        follower = cluster.brokers[FOLLOWER]
        boot_started = time.perf_counter()
        await asyncio.to_thread(follower.start)
        boot_s = time.perf_counter() - boot_started
        behind = target - follower_bytes(cluster)
        leader_pids = [cluster.brokers[replicas[0]].proc.pid for replicas in ASSIGNMENT.values()]
        follower_cpu, leaders_cpu = cpu_seconds([follower.proc.pid]), cpu_seconds(leader_pids)
        started = time.perf_counter()  # it registers as soon as it listens, and the controller resyncs it
        await wait_caught_up(cluster, target)
        seconds = time.perf_counter() - started
        gib = behind / GiB
        return Round(behind / seconds, boot_s, (cpu_seconds([follower.proc.pid]) - follower_cpu) / gib,
                     (cpu_seconds(leader_pids) - leaders_cpu) / gib)  # fmt: skip


async def wait_caught_up(cluster: LocalCluster, target: int) -> None:
    deadline = time.perf_counter() + CATCH_UP_TIMEOUT_S
    while follower_bytes(cluster) < target:
        if time.perf_counter() > deadline:
            raise TimeoutError(f"broker {FOLLOWER} did not catch up in {CATCH_UP_TIMEOUT_S} s")
        await asyncio.sleep(POLL_INTERVAL_S)


def run(quick: bool, workdir: Path) -> list[Result]:
    volume = (32 if quick else 1024) * MiB
    path = page_cached_file(workdir, volume)
    try:
        with discard_server() as address:
            sendfile = repeat(lambda: sendfile_to_loopback(address, path), warmup=1, repeats=3)
    finally:
        path.unlink()
    samples = [asyncio.run(catch_up_round(workdir / f"follower-catchup-{n}", volume, 16 * MiB))
               for n in range(1 if quick else ROUNDS)]  # fmt: skip
    catch_up = Stats.of([r.bytes_per_s for r in samples])
    extra = {"backlog_bytes": volume, "follower_start_s": [r.follower_start_s for r in samples],
             "follower_cpu_s_per_gib": [r.follower_cpu_s_per_gib for r in samples],
             "leaders_cpu_s_per_gib": [r.leaders_cpu_s_per_gib for r in samples]}  # fmt: skip
    return [Result(NAME, f"restarted follower, {volume // MiB} MiB backlog, 2 leaders", "B/s", catch_up,
                   "raw sendfile", sendfile.median, extra)]  # fmt: skip
