"""Partition scaling on a 3-broker cluster (RF=3, min.insync.replicas=2, Kafka's replication defaults):
acks=all produce throughput over 1, 100, 1,000 and 10,000 partitions, and what the brokers cost when idle.

Every round of every count gets a fresh cluster and one topic created with one CreateTopics, replicas assigned round-robin so
each broker leads a third. Once the brokers have applied it, the cluster is left alone for IDLE_S (QUICK_IDLE_S in quick mode): replica
fetchers still poll their leaders (a fetch parks up to replica.fetch.wait.max.ms), so idle CPU grows with the
partitions a broker follows. Then confluent-kafka (idempotent, acks=all, 1 KiB records) produces round-robin
over all partitions: with more partitions, each batch holds fewer records. The producer lingers LINGER_MS at
every count, as a user spreading records over many partitions configures it: with librdkafka's default 5 ms,
4 MB/s over 1,000 partitions (the figure measured so) is 20 records per linger for 1,000 partitions, so nearly
every batch held one record and the figure measured the client's batching as much as the brokers.

Baselines: throughput is divided by the 1-partition figure of the same run; idle CPU is a fraction of one
core (CPU-seconds per second, the mean over the three brokers). Open files per broker (read from
/proc/PID/fd after the produce) are against the process's limit: a segment in use holds FDS_PER_OPEN_SEGMENT
descriptors, and the broker's file budget (log.open.files.max, by default half the soft ulimit -n) bounds
them all together, closing the least recently used. A count whose logs could not fit is skipped and
reported on stderr.
"""

import asyncio
import os
import resource
import sys
from pathlib import Path

from replog.log.file_budget import DEFAULT_SHARE_OF_FILE_LIMIT, MIN_OPEN_FILES

from .harness import MiB, Result, Stats, replicated_cluster, thread_cpu_seconds
from .replicated_produce import VALUE_BYTES, produce

NAME = "partition-scaling"
TOPIC = "scaling"
IDLE_S = 5.0
QUICK_IDLE_S = 2.0  # long enough to see the idle cost grow from 1 to 100 partitions
SETTLE_S = 2.0  # after the LeaderAndIsr is applied: fetchers start and the ISR settles before the idle window
# The segment's log file and its two index files, each index mapped (Python's mmap keeps a second descriptor).
FDS_PER_OPEN_SEGMENT = 5
FD_HEADROOM = 1_000  # sockets, the controller's and clients' connections, checkpoints being written
# Kafka's guidance for throughput over many partitions (linger.ms up to 100 ms): a batch per partition per
# linger gathers the records that arrive meanwhile. The same at every count, the 1-partition baseline included
# (its batches fill their 1 MB first at any rate above 10 MB/s).
LINGER_MS = 100
# Each broker creates every partition's log (RF=3 on 3 brokers) before it answers the LeaderAndIsr: at
# 10,000 that is a directory and three small files each, longer on a 2-vCPU VM than Kafka's 30 s
# controller.socket.timeout.ms. The controller waits longer for such a count rather than resend it.
LARGE_COUNT = 10_000
# Run only some counts, e.g. the 10,000 alone, which takes minutes a round: `REPLOG_BENCH_PARTITION_COUNTS=10000`.
COUNTS_VARIABLE = "REPLOG_BENCH_PARTITION_COUNTS"
LARGE_COUNT_CONTROLLER_OPTIONS = {"request_timeout_ms": 300_000, "propagation_timeout_ms": 300_000}


def counts_from_environment(value: str | None, default: tuple[int, ...]) -> tuple[int, ...]:
    """The partition counts to run: REPLOG_BENCH_PARTITION_COUNTS ("10000", "1000,10000") or the default;
    1 always, the baseline the throughputs are divided by."""
    if not value:
        return default
    counts = {int(part) for part in value.split(",") if part.strip()}
    if not counts or min(counts) < 1:
        raise ValueError(f"{COUNTS_VARIABLE}={value!r}: positive partition counts, comma-separated")
    return tuple(sorted(counts | {1}))


def fits_open_file_limit(partitions: int, limit: int | None = None, budget: int | None = None) -> bool:
    """Whether a broker's segment files fit `limit` (the soft RLIMIT_NOFILE) beside FD_HEADROOM, when at most
    `budget` (log.open.files.max; None: the broker's default for `limit`) stay open at once."""
    if limit is None:
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if budget is None:
        budget = max(MIN_OPEN_FILES, int(limit * DEFAULT_SHARE_OF_FILE_LIMIT))
    return min(partitions * FDS_PER_OPEN_SEGMENT, budget) + FD_HEADROOM <= limit


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def round_robin_assignment(partitions: int) -> dict[int, list[int]]:
    """Partition p on brokers p, p+1, p+2 (mod 3, from 1): every broker leads a third and follows the rest."""
    return {p: [(p + i) % 3 + 1 for i in range(3)] for p in range(partitions)}


async def scaling_round(root: Path, partitions: int, value: bytes, count: int,
                        idle_s: float) -> tuple[float, float, float, int]:  # fmt: skip
    """(value bytes per second produced, mean idle CPU fraction per broker, seconds to create the topic,
    the most files a broker holds open after the produce)."""
    loop = asyncio.get_running_loop()
    options = LARGE_COUNT_CONTROLLER_OPTIONS if partitions >= LARGE_COUNT else None
    async with replicated_cluster(root, controller_options=options) as cluster:
        started = loop.time()
        await cluster.controller.create_topic(TOPIC, round_robin_assignment(partitions),
                                              {"min.insync.replicas": "2"})
        await cluster.controller.settle()
        created_s = loop.time() - started
        await asyncio.sleep(SETTLE_S)
        pids = [broker.proc.pid for broker in cluster.brokers.values()]
        before = thread_cpu_seconds(pids)
        idle_started = loop.time()
        await asyncio.sleep(idle_s)
        idle = (thread_cpu_seconds(pids) - before) / (loop.time() - idle_started) / len(pids)
        # Producing blocks, and the controller in this loop must keep answering the brokers meanwhile.
        seconds = await asyncio.to_thread(produce, cluster.bootstrap, TOPIC, value, count, partitions, LINGER_MS)
        files = max(open_files(pid) for pid in pids)
    return count * len(value) / seconds, idle, created_s, files


def run(quick: bool, workdir: Path) -> list[Result]:
    # Quick mode is a smoke test: two counts, one round. Full mode interleaves its rounds over the counts
    # (1, 100, ..., then again), so a drift of this shared VM hits every count alike.
    counts, volume, rounds = ((1, 100), 16 * MiB, 1) if quick else ((1, 100, 1_000, 10_000), 128 * MiB, 3)
    counts = counts_from_environment(os.environ.get(COUNTS_VARIABLE), counts)
    idle_s = QUICK_IDLE_S if quick else IDLE_S
    value = os.urandom(VALUE_BYTES)
    fitting = []
    for partitions in counts:
        if fits_open_file_limit(partitions):
            fitting.append(partitions)
        else:
            print(f"partition-scaling: {partitions:,} partitions skipped: up to "
                  f"{partitions * FDS_PER_OPEN_SEGMENT:,} open files per broker, limit "
                  f"{resource.getrlimit(resource.RLIMIT_NOFILE)[0]:,}", file=sys.stderr)
    samples: dict[int, list[tuple[float, float, float, int]]] = {partitions: [] for partitions in fitting}
    for round_number in range(rounds):
        for partitions in fitting:
            root = workdir / f"scaling-{partitions}-{round_number}"
            samples[partitions].append(
                asyncio.run(scaling_round(root, partitions, value, volume // VALUE_BYTES, idle_s))
            )
    one = Stats.of([sample[0] for sample in samples[1]]).median
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    results = []
    for partitions, rounds_ in samples.items():
        throughput = Stats.of([sample[0] for sample in rounds_])
        extra = {"partitions": partitions, "records_per_s": throughput.median / VALUE_BYTES,
                 "create_topic_s": [round(sample[2], 2) for sample in rounds_], "run_bytes": volume,
                 "rounds": rounds}  # fmt: skip
        results.append(Result(NAME, f"RF=3 acks=all produce, {partitions:,} partitions", "B/s",
                              throughput, "1 partition, same run", one, extra))
        results.append(Result(NAME, f"idle broker CPU, {partitions:,} partitions", "CPU-s/s",
                              Stats.of([sample[1] for sample in rounds_]), "one core", 1.0,
                              {"partitions": partitions, "idle_s": idle_s, "rounds": rounds}))
        results.append(Result(NAME, f"open files per broker, {partitions:,} partitions", "files",
                              Stats.of([sample[3] for sample in rounds_]), "open-file limit", limit,
                              {"partitions": partitions, "rounds": rounds}))
    return results
