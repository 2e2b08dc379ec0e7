"""Replicated produce throughput on a 3-broker cluster with Kafka's replication defaults.

confluent-kafka, acks=all, at most 5 requests in flight per broker, 1 KiB values, no compression, linger
5 ms, ~1 MB batches, records sent round-robin to 3 partitions whose leaders are brokers 1, 2 and 3. Each
round starts a cluster with an RF=3 topic (min.insync.replicas=2) and an RF=1 topic with the same leaders,
and measures one run into each after a warm-up, so the ratio of the two is the cost of replication; once
with an idempotent producer and once without. Figures are value bytes per second, divided by raw loopback
TCP and raw file append measured in the same run; broker CPU is the utime + stime of the three broker
processes during a run, client CPU that of this process (the producer with librdkafka's threads; the
controller's few heartbeat answers too).

Both producers are measured because where the brokers and the client share few cores (2 on the benchmark
VM), the idempotent one takes CPU the brokers would use: while a partition's 5 requests are in flight and
its next batch is ready, librdkafka's idempotent producer polls without sleeping (its broker threads, perf:
`clock_gettime`, `poll`, `rd_kafka_toppar_producer_serve`), ~6-12 client CPU-s per GiB at RF=3 against
~1.7 without idempotence at the same window (docs/profiles/rf3-throughput.md).
"""

import asyncio
import os
import resource
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
# max.in.flight.requests.per.connection: the Java producer's default and the most an idempotent producer
# allows (librdkafka's own default is 1,000,000), so both producers here have the same window.
MAX_IN_FLIGHT = 5
# Replicas per partition, leader first: each broker leads one partition (and follows the other two).
LAYOUTS = {
    "RF=3": ({0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}, {"min.insync.replicas": "2"}),
    "RF=1": ({0: [1], 1: [2], 2: [3]}, {}),
}
# The measured runs of a round: name -> (layout, idempotent producer).
RUNS = {
    "RF=3": ("RF=3", True),
    "RF=1": ("RF=1", True),
    "RF=3 not idempotent": ("RF=3", False),
    "RF=1 not idempotent": ("RF=1", False),
}
RUN_TOPIC_DELETE_TIMEOUT_S = 60  # for every replica of a measured run's topic to be deleted after the run


def warmup_flush_bound_s(partitions: int) -> float:
    """How long the warm-up's first records may take: librdkafka sends one Produce request per partition, so
    at 10,000 partitions the warm-up is 10,000 acks=all requests on 2 vCPUs, which failed a 30 s bound at a load
    average of 3-7 (docs/profiles/index-creation-ahead.md). Outside the timed region, so the bound only
    has to tell a stuck cluster from a slow one."""
    return 30.0 + 0.01 * partitions


def produce(bootstrap: str, topic: str, value: bytes, count: int, partitions: int = PARTITIONS,
            linger_ms: int = LINGER_MS, idempotent: bool = True) -> float:
    """Seconds to produce `count` records round-robin over the partitions until all are acknowledged."""
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap,
        "enable.idempotence": idempotent,
        "acks": "all",
        "max.in.flight.requests.per.connection": MAX_IN_FLIGHT,
        "linger.ms": linger_ms,
        "batch.size": BATCH_BYTES,
        "compression.type": "none",
        "queue.buffering.max.kbytes": 256 * 1024,
    })  # fmt: skip
    # The producer id (librdkafka asks for it in the background, ~0.5 s after creation), the metadata and
    # a connection to every leader, outside the timed region: one empty record to each partition.
    for partition in range(partitions):
        producer.produce(topic, b"", partition=partition)
    if producer.flush(warmup_bound_s := warmup_flush_bound_s(partitions)):
        raise RuntimeError(f"confluent-kafka: the first records were not acknowledged in {warmup_bound_s:.0f} s")
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


def client_cpu_seconds() -> float:
    """User plus system CPU time of this process so far, all threads, the exited ones too (librdkafka's
    threads end with their producer)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def produce_round(
    root: Path, value: bytes, count: int, warmup_count: int, reverse: bool = False
) -> dict[str, tuple[float, float, float]]:
    """One fresh cluster with a topic per layout: a discarded warm-up run into each, then each of RUNS;
    returns per run value bytes per second, broker CPU-seconds and client CPU-seconds per GiB of values.
    `reverse` runs RUNS in reverse order: a run late in a round measured up to 1.5x the CPU per GiB of an
    early one on the shared VM, so the producers take turns at going first. Like the file-append baseline,
    each round writes new files and frees them (the cluster directory goes afterwards): on this kind of VM
    (memory reclaim pages the page cache out) writes slow down 2x once a few GB pile up.

    Each run starts with the page cache's dirty data written back (`sync`, outside the timed region): an RF=3
    run writes 3 x 512 MiB, and one that starts on the dirty data its predecessors left can cross the kernel's
    dirty throttling point ((vm.dirty_background_ratio + vm.dirty_ratio) / 2 of the available memory, ~2.9 GB
    on the 23 GiB VM), past which the brokers' writes are held to the disk's writeback rate (~480 MB/s on the
    VM: ~160 MB/s of values at RF=3, the idle VM's slowest round), depending on the run's place in the round
    (docs/profiles/rf3-throughput.md, "Stability").

    Each measured run writes a topic of its own, deleted (and its files gone) before the next run: a run that
    started on the 2-3 GB its predecessors in the round had left in the page cache measured up to twice the
    brokers' CPU per GiB of a round's first run, the excess in kernel time, for the same requests, once the
    VM's free memory ran low (docs/profiles/rf3-throughput.md, "Session 12"). The warm-up topics stay for the round."""
    measured = {}
    async with replicated_cluster(root) as cluster:
        for layout, (assignment, configs) in LAYOUTS.items():
            await cluster.controller.create_topic(topic_name(layout), assignment, configs)
        pids = [broker.proc.pid for broker in cluster.brokers.values()]
        # Producing blocks, and the controller in this loop must keep answering the brokers meanwhile.
        for layout in LAYOUTS:
            await asyncio.to_thread(produce, cluster.bootstrap, topic_name(layout), value, warmup_count)
        gib = count * VALUE_BYTES / GiB
        for run in reversed(RUNS) if reverse else RUNS:
            layout, idempotent = RUNS[run]
            assignment, configs = LAYOUTS[layout]
            topic = run_topic_name(run)
            await cluster.controller.create_topic(topic, assignment, configs)
            await asyncio.to_thread(os.sync)
            cpu_before, client_before = cpu_seconds(pids), client_cpu_seconds()
            seconds = await asyncio.to_thread(produce, cluster.bootstrap, topic, value, count,
                                              idempotent=idempotent)
            cpu, client = cpu_seconds(pids) - cpu_before, client_cpu_seconds() - client_before
            measured[run] = (count * VALUE_BYTES / seconds, cpu / gib, client / gib)
            await delete_run_topic(cluster, topic, assignment)
    return measured


async def delete_run_topic(cluster, topic: str, assignment: dict[int, list[int]]) -> None:
    """Delete a measured run's topic and wait until every replica's files are gone, so the next run starts
    with the same page cache as the first run of a round did."""
    await cluster.controller.delete_topic(topic)
    await cluster.wait_for(
        lambda: not any(cluster.log_dir(node, topic, partition).exists()
                        for partition, replicas in assignment.items() for node in replicas),
        RUN_TOPIC_DELETE_TIMEOUT_S, f"the logs of {topic} to be deleted")


def topic_name(layout: str) -> str:
    return layout.replace("=", "").lower()


def run_topic_name(run: str) -> str:
    """The measured run's own topic, apart from the warm-up's: "RF=3 not idempotent" -> "run-rf3-not-idempotent"."""
    return "run-" + topic_name(run).replace(" ", "-")


def run(quick: bool, workdir: Path) -> list[Result]:
    volume, warmup_volume = (32 * MiB, 8 * MiB) if quick else (512 * MiB, 64 * MiB)
    rounds = 1 if quick else 5
    with discard_server() as address:
        tcp = repeat(lambda: loopback_tcp(address, volume), warmup=1, repeats=3)
    append = repeat(lambda: file_append(workdir, volume, fdatasync=False), warmup=1, repeats=3)
    value = os.urandom(VALUE_BYTES)
    samples = [
        asyncio.run(produce_round(workdir / f"replicated-produce-{n}", value, volume // VALUE_BYTES,
                                  warmup_volume // VALUE_BYTES, reverse=n % 2 == 1))
        for n in range(rounds)
    ]  # fmt: skip
    return results(samples, tcp.median, append.median, volume)


def results(samples: list[dict[str, tuple[float, float, float]]], tcp: float, append: float,
            volume: int) -> list[Result]:
    """The headline figures from the rounds' samples (produce_round's figures per run)."""

    def across_rounds(run: str, figure: int) -> Stats:  # figure 0: bytes/s, 1: broker CPU-s/GiB, 2: client
        return Stats.of([sample[run][figure] for sample in samples])

    def extra(run: str) -> dict:
        return {
            "records_per_s": across_rounds(run, 0).median / VALUE_BYTES,
            "cpu_s_per_gib": across_rounds(run, 1).median,
            "client_cpu_s_per_gib": across_rounds(run, 2).median,
            "run_bytes": volume,
        }

    rf3, rf1 = across_rounds("RF=3", 0), across_rounds("RF=1", 0)
    rf3_plain, rf1_plain = across_rounds("RF=3 not idempotent", 0), across_rounds("RF=1 not idempotent", 0)
    rf3_case, rf1_case = "RF=3 acks=all, 3 partitions, 1 KiB", "RF=1 acks=all, 3 partitions, 1 KiB"
    rf3_plain_case = "RF=3 acks=all, not idempotent, 3 partitions, 1 KiB"
    return [
        Result(NAME, rf3_case, "B/s", rf3, "loopback TCP", tcp, extra("RF=3")),
        Result(NAME, rf3_case, "B/s", rf3, "file append", append, extra("RF=3")),
        Result(NAME, rf3_case, "B/s", rf3, "RF=1, same cluster", rf1.median, extra("RF=3")),
        Result(NAME, rf1_case, "B/s", rf1, "loopback TCP", tcp, extra("RF=1")),
        Result(NAME, "RF=3 broker CPU (3 brokers)", "CPU-s/GiB", across_rounds("RF=3", 1), "RF=1",
               across_rounds("RF=1", 1).median),
        Result(NAME, rf3_plain_case, "B/s", rf3_plain, "RF=1 not idempotent, same cluster", rf1_plain.median,
               extra("RF=3 not idempotent")),
        Result(NAME, "RF=3 client CPU (producer process)", "CPU-s/GiB", across_rounds("RF=3", 2),
               "not idempotent", across_rounds("RF=3 not idempotent", 2).median),
        # Per round beside the MB/s of the same rounds: a slow round with a flat CPU per GiB waited (for a
        # core, or on the disk), one with more CPU per GiB did more work.
        Result(NAME, "RF=3 not idempotent, broker CPU (3 brokers)", "CPU-s/GiB",
               across_rounds("RF=3 not idempotent", 1), "RF=1 not idempotent",
               across_rounds("RF=1 not idempotent", 1).median),
    ]
