"""Replicated produce throughput on a 3-broker cluster with Kafka's replication defaults.

confluent-kafka, idempotent (so acks=all), 1 KiB values, no compression, linger 5 ms, ~1 MB batches,
records sent round-robin to 3 partitions whose leaders are brokers 1, 2 and 3. Each round starts a cluster
with an RF=3 topic (min.insync.replicas=2) and an RF=1 topic with the same leaders, and measures one run
into each after a warm-up, so the ratio of the two is the cost of replication. Figures are value bytes per
second, divided by raw loopback TCP and raw file append measured in the same run; broker CPU is the
utime + stime of the three broker processes during a run.
"""

import asyncio
import os
import time
from pathlib import Path

import confluent_kafka

from .baselines import discard_server, file_append, loopback_tcp
from .harness import GiB, MiB, Result, Stats, cpu_seconds, repeat, replicated_cluster

NAME = "replicated-produce"
VALUE_BYTES = 1024
BATCH_BYTES = 1_000_000  # under the broker's default message.max.bytes (1,048,588) with batch overhead
LINGER_MS = 5
PARTITIONS = 3
# Replicas per partition, leader first: each broker leads one partition (and follows the other two).
LAYOUTS = {
    "RF=3": ({0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}, {"min.insync.replicas": "2"}),
    "RF=1": ({0: [1], 1: [2], 2: [3]}, {}),
}


def produce(bootstrap: str, topic: str, value: bytes, count: int, partitions: int = PARTITIONS,
            linger_ms: int = LINGER_MS) -> float:
    """Seconds to produce `count` records round-robin over the partitions until all are acknowledged."""
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": linger_ms,
        "batch.size": BATCH_BYTES,
        "compression.type": "none",
        "queue.buffering.max.kbytes": 256 * 1024,
    })  # fmt: skip
    # The producer id (librdkafka asks for it in the background, ~0.5 s after creation), the metadata and
    # a connection to every leader, outside the timed region: one empty record to each partition.
    for partition in range(partitions):
        producer.produce(topic, b"", partition=partition)
    if producer.flush(30):
        raise RuntimeError("confluent-kafka: the first records were not acknowledged in 30 s")
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.005)
    if remaining := producer.flush(120):
        raise RuntimeError(f"confluent-kafka: {remaining} messages undelivered")
    return time.perf_counter() - started


async def produce_round(
    root: Path, value: bytes, count: int, warmup_count: int
) -> dict[str, tuple[float, float]]:
    """One fresh cluster with a topic per layout: a discarded warm-up run into each, then a measured run into
    each; returns per layout value bytes per second and broker CPU-seconds per GiB of values. Like the
    file-append baseline, each round writes new files and frees them (the cluster directory goes afterwards):
    on this kind of VM (memory reclaim pages the page cache out) writes slow down 2x once a few GB pile up."""
    measured = {}
    async with replicated_cluster(root) as cluster:
        for layout, (assignment, configs) in LAYOUTS.items():
            await cluster.controller.create_topic(topic_name(layout), assignment, configs)
        pids = [broker.proc.pid for broker in cluster.brokers.values()]
        # Producing blocks, and the controller in this loop must keep answering the brokers meanwhile.
        for layout in LAYOUTS:
            await asyncio.to_thread(produce, cluster.bootstrap, topic_name(layout), value, warmup_count)
        for layout in LAYOUTS:
            cpu_before = cpu_seconds(pids)
            seconds = await asyncio.to_thread(produce, cluster.bootstrap, topic_name(layout), value, count)
            cpu = cpu_seconds(pids) - cpu_before
            measured[layout] = (count * VALUE_BYTES / seconds, cpu / (count * VALUE_BYTES / GiB))
    return measured


def topic_name(layout: str) -> str:
    return layout.replace("=", "").lower()


def run(quick: bool, workdir: Path) -> list[Result]:
    volume, warmup_volume = (32 * MiB, 8 * MiB) if quick else (512 * MiB, 64 * MiB)
    rounds = 1 if quick else 5
    with discard_server() as address:
        tcp = repeat(lambda: loopback_tcp(address, volume), warmup=1, repeats=3)
    append = repeat(lambda: file_append(workdir, volume, fdatasync=False), warmup=1, repeats=3)
    value = os.urandom(VALUE_BYTES)
    samples = [
        asyncio.run(produce_round(workdir / f"replicated-produce-{n}", value, volume // VALUE_BYTES,
                                  warmup_volume // VALUE_BYTES))
        for n in range(rounds)
    ]  # fmt: skip

    def across_rounds(layout: str, figure: int) -> Stats:  # figure 0: bytes per second, 1: CPU-s per GiB
        return Stats.of([sample[layout][figure] for sample in samples])

    rf3, rf3_cpu = across_rounds("RF=3", 0), across_rounds("RF=3", 1)
    rf1, rf1_cpu = across_rounds("RF=1", 0), across_rounds("RF=1", 1)
    rf3_case, rf1_case = "RF=3 acks=all, 3 partitions, 1 KiB", "RF=1 acks=all, 3 partitions, 1 KiB"
    rf3_extra = {
        "records_per_s": rf3.median / VALUE_BYTES,
        "cpu_s_per_gib": rf3_cpu.median,
        "run_bytes": volume,
    }
    rf1_extra = {
        "records_per_s": rf1.median / VALUE_BYTES,
        "cpu_s_per_gib": rf1_cpu.median,
        "run_bytes": volume,
    }
    return [
        Result(NAME, rf3_case, "B/s", rf3, "loopback TCP", tcp.median, rf3_extra),
        Result(NAME, rf3_case, "B/s", rf3, "file append", append.median, rf3_extra),
        Result(NAME, rf3_case, "B/s", rf3, "RF=1, same cluster", rf1.median, rf3_extra),
        Result(NAME, rf1_case, "B/s", rf1, "loopback TCP", tcp.median, rf1_extra),
        Result(NAME, "RF=3 broker CPU (3 brokers)", "CPU-s/GiB", rf3_cpu, "RF=1", rf1_cpu.median),
    ]
