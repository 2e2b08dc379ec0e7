"""End-to-end latency on RF=3 with acks=all, at fixed produce rates, against loopback TCP round trips.

A producer thread paces 1 KiB records (acks=all) at a target rate onto a
3-partition RF=3 topic (min.insync.replicas=2, leaders on brokers 1, 2 and 3); each value starts with the
time.perf_counter_ns() at which it was handed to produce(). A consumer thread in the same process (so on
the same clock), assigned to every partition from the end, records receive time minus send time; it can only
read records below the high watermark, so the figure covers replication to the whole ISR. The samples after
a warm-up are split into consecutive windows; a percentile's median and min-max are over the windows. Rates
the producer does not sustain (under 95% of the target over the window) are skipped and reported on stderr.
The baseline is the round trip of a 1 KiB message to an echo process over loopback TCP, measured in the same
run and summarised the same way.

Each rate runs three times: an idempotent producer with linger.ms 5 (librdkafka's default: fewer, larger
requests) and with linger.ms 0 (every record leaves at once, so the figure is the brokers' path alone, not the
producer's batching wait); and a producer without idempotence (librdkafka's default) at linger.ms 0 with the
same window of 5 requests in flight. librdkafka's idempotent producer polls without sleeping while its window
is full (docs/profiles/rf3-throughput.md), which at linger 0 takes about as much CPU as the three brokers; the
third run shows the brokers' path without that spin.
The consumer belongs to a group, so its first FindCoordinator creates __consumer_offsets (50 partitions,
RF=3); the run waits for its coordinator before the warm-up, as on any cluster that has served a group before,
so that creating 150 replicas does not fall inside the measurement.

Each rate's extra data also carries librdkafka's own view of the producer's side (its statistics, over the
measured stretch): how long records waited in its partition queue, requests in its output buffer, and a
request's round trip, which splits the end-to-end figure into the client's queue and the brokers' answer;
and the cores that the three brokers and this process (the clients' librdkafka threads, the pacing and
receiving threads) kept busy over the measured stretch, which says whether the clients and the brokers
compete for the machine's cores.
"""

import asyncio
import json
import os
import resource
import statistics
import struct
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import confluent_kafka

from .baselines import echo_server, loopback_round_trips
from .harness import Result, Stats, cpu_seconds, percentile, replicated_cluster

NAME = "replicated-latency"
TOPIC = "latency"
ASSIGNMENT = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
VALUE_BYTES = 1024
SEND_TIME = struct.Struct(">q")
PERCENTILES = {"p50": 0.50, "p99": 0.99, "p99.9": 0.999}
WINDOWS = 3
SUSTAINED_FRACTION = 0.95
PACING_TICK_S = 0.001  # the producer wakes this often and sends what is due
DRAIN_TIMEOUT_S = 30.0
COORDINATOR_TIMEOUT_S = 30.0
CLIENT_STATS_INTERVAL_MS = 1000
# librdkafka's per-broker latency windows (STATISTICS.md), in microseconds: int_latency is a record's wait in
# the partition queue until a request takes it (the linger, and a full max.in.flight window: 5 requests per
# connection with idempotence); outbuf_latency a request's wait to be written; rtt a request's round trip,
# for an acks=all Produce the brokers' replication wait included.
CLIENT_LATENCIES = ("int_latency", "outbuf_latency", "rtt")


@dataclass
class RateRun:
    latencies_ns: list[int]  # in send order, records sent after the warm-up only
    sent: int  # records sent after the warm-up
    achieved_bytes_per_s: float
    client_latencies_us: dict[str, dict[str, float]]  # ClientLatencies.summary()
    busy_cores: dict[str, float]  # BusyCores.summary()


def _own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class BusyCores:
    """CPU time over wall time between two marks, for the brokers and for this process: 1.0 is one core kept
    busy. At linger.ms 0 librdkafka's producer threads use about as much CPU as the three brokers together
    (docs/profiles/rf3-linger0.md); on a machine of two cores that decides how long a record waits
    for each process on its path."""

    def __init__(self, broker_pids: list[int], *, broker_cpu=cpu_seconds, own_cpu=_own_cpu_seconds,
                 clock=time.perf_counter) -> None:  # fmt: skip
        self._broker_pids = broker_pids
        self._broker_cpu, self._own_cpu, self._clock = broker_cpu, own_cpu, clock
        self._marks: list[tuple[float, float, float]] = []

    @property
    def marked(self) -> bool:
        return bool(self._marks)

    def mark(self) -> None:
        """The start of the stretch, then its end."""
        assert len(self._marks) < 2
        self._marks.append((self._clock(), self._broker_cpu(self._broker_pids), self._own_cpu()))

    def summary(self) -> dict[str, float]:
        if len(self._marks) < 2 or self._marks[1][0] <= self._marks[0][0]:
            return {}
        (t0, brokers0, own0), (t1, brokers1, own1) = self._marks
        return {"brokers": (brokers1 - brokers0) / (t1 - t0), "bench_process": (own1 - own0) / (t1 - t0)}


class ClientLatencies:
    """Collects the producer's statistics windows (stats_cb, called from its poll) emitted within a stretch of
    perf_counter_ns, from the brokers it produces to (not its bootstrap entries)."""

    def __init__(self) -> None:
        self.from_ns: int | None = None  # nothing is kept until the measured stretch is known
        self.until_ns: int | None = None
        self.windows: dict[str, list[dict]] = {name: [] for name in CLIENT_LATENCIES}

    def on_stats(self, stats_json: str) -> None:
        now = time.perf_counter_ns()
        if self.from_ns is None or now < self.from_ns or (self.until_ns is not None and now > self.until_ns):
            return
        for broker in json.loads(stats_json).get("brokers", {}).values():
            if broker.get("nodeid", -1) < 0:
                continue
            for name in CLIENT_LATENCIES:
                window = broker.get(name)
                if window and window.get("cnt"):
                    self.windows[name].append(window)

    def summary(self) -> dict[str, dict[str, float]]:
        """For each quantity with samples, the median over the kept windows of their p50 and of their p99 (µs)."""
        return {name: {q: statistics.median(w[q] for w in windows) for q in ("p50", "p99")}
                for name, windows in self.windows.items() if windows}


@dataclass(frozen=True)
class ProducerVariant:
    linger_ms: int
    idempotent: bool

    def label(self) -> str:
        return f"linger {self.linger_ms} ms" + ("" if self.idempotent else ", not idempotent")


VARIANTS = (ProducerVariant(5, True), ProducerVariant(0, True), ProducerVariant(0, False))
# The window of requests in flight per connection that idempotence implies, kept without it so that the two
# linger-0 runs differ only in the producer ids.
MAX_IN_FLIGHT = 5


def primed_producer(bootstrap: str, topic: str, padding: bytes, variant: ProducerVariant,
                    client_latencies: ClientLatencies) -> confluent_kafka.Producer:  # fmt: skip
    """A producer that already has its producer id if idempotent (librdkafka asks for it in the background,
    ~0.5 s after creation) and a connection to every leader: one record, stamped 0 so that the consumer
    counts it as warm-up, to each partition. Its statistics go to client_latencies."""
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": variant.idempotent,
        "max.in.flight.requests.per.connection": MAX_IN_FLIGHT,
        "linger.ms": variant.linger_ms,
        "compression.type": "none",
        "queue.buffering.max.kbytes": 256 * 1024,
        "statistics.interval.ms": CLIENT_STATS_INTERVAL_MS,
        "stats_cb": client_latencies.on_stats,
    })  # fmt: skip
    for partition in ASSIGNMENT:
        producer.produce(topic, SEND_TIME.pack(0) + padding, partition=partition)
    if producer.flush(30):
        raise RuntimeError("confluent-kafka: the first records were not acknowledged in 30 s")
    return producer


def paced_produce(producer: confluent_kafka.Producer, topic: str, padding: bytes, bytes_per_s: float,
                  started_ns: int, warmed_ns: int, ends_ns: int) -> tuple[int, float]:  # fmt: skip
    """Produce at `bytes_per_s` from started_ns to ends_ns (perf_counter_ns); returns the records sent from
    warmed_ns on and their rate in bytes per second."""
    records_per_ns = bytes_per_s / VALUE_BYTES / 1e9
    sent = sent_after_warmup = 0
    while (now := time.perf_counter_ns()) < ends_ns:
        due = int((now - started_ns) * records_per_ns)
        while sent < due:
            try:
                send_ns = time.perf_counter_ns()
                producer.produce(topic, SEND_TIME.pack(send_ns) + padding)
            except BufferError:  # local queue full: the brokers are not keeping up; wait for deliveries
                producer.poll(0.001)
                continue
            sent += 1
            sent_after_warmup += send_ns >= warmed_ns
        producer.poll(0)
        time.sleep(PACING_TICK_S)
    if remaining := producer.flush(DRAIN_TIMEOUT_S):
        raise RuntimeError(f"confluent-kafka: {remaining} records undelivered")
    return sent_after_warmup, sent_after_warmup * VALUE_BYTES / ((ends_ns - warmed_ns) / 1e9)


def measure_rate(bootstrap: str, topic: str, bytes_per_s: float, warmup_s: float, measure_s: float,
                 variant: ProducerVariant, broker_pids: list[int] = ()) -> RateRun:  # fmt: skip
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "bench-latency",
        "enable.auto.commit": False,
    })  # fmt: skip
    samples: list[tuple[int, int]] = []  # (send ns, latency ns)
    outcome: list[tuple[int, float]] = []
    producing = None
    busy = BusyCores(list(broker_pids))
    try:
        wait_for_group_coordinator(consumer, topic)
        consumer.assign(end_positions(consumer, topic))
        padding = os.urandom(VALUE_BYTES - SEND_TIME.size)
        client_latencies = ClientLatencies()
        producer = primed_producer(bootstrap, topic, padding, variant, client_latencies)
        started_ns = time.perf_counter_ns()
        warmed_ns = started_ns + int(warmup_s * 1e9)
        ends_ns = warmed_ns + int(measure_s * 1e9)
        client_latencies.from_ns, client_latencies.until_ns = warmed_ns, ends_ns
        producing = threading.Thread(target=lambda: outcome.append(
            paced_produce(producer, topic, padding, bytes_per_s, started_ns, warmed_ns, ends_ns)))  # fmt: skip
        producing.start()
        while producing.is_alive():
            receive(consumer, samples, warmed_ns)
            if not busy.marked and time.perf_counter_ns() >= warmed_ns:
                busy.mark()
        busy.mark()  # the producer has sent its last record and flushed
        if not outcome:
            raise RuntimeError("the producer thread failed (see its traceback above)")
        sent, achieved = outcome[0]
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while len(samples) < sent and time.monotonic() < deadline:
            receive(consumer, samples, warmed_ns)
    finally:
        if producing is not None:
            producing.join()
        consumer.close()
    samples.sort()
    return RateRun([latency for _, latency in samples], sent, achieved, client_latencies.summary(), busy.summary())


COORDINATOR_NOT_READY = {confluent_kafka.KafkaError.NOT_COORDINATOR, confluent_kafka.KafkaError.COORDINATOR_NOT_AVAILABLE,
                         confluent_kafka.KafkaError.COORDINATOR_LOAD_IN_PROGRESS}


def wait_for_group_coordinator(consumer: confluent_kafka.Consumer, topic: str) -> None:
    """Ask the group's coordinator for committed offsets (FindCoordinator, then OffsetFetch), which answers
    once __consumer_offsets exists and the group's partition is loaded. A retriable error (NOT_COORDINATOR
    while the offsets partitions' leaders settle, a load in progress) is asked again, as a client would;
    raises KafkaException on any other error or once COORDINATOR_TIMEOUT_S has passed."""
    deadline = time.monotonic() + COORDINATOR_TIMEOUT_S
    partitions = [confluent_kafka.TopicPartition(topic, p) for p in ASSIGNMENT]
    while True:
        try:
            consumer.committed(partitions, timeout=max(deadline - time.monotonic(), 0.1))
            return
        except confluent_kafka.KafkaException as e:
            if e.args[0].code() not in COORDINATOR_NOT_READY or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def end_positions(consumer: confluent_kafka.Consumer, topic: str) -> list[confluent_kafka.TopicPartition]:
    """Each partition at its high watermark now. Assigned at OFFSET_END instead, librdkafka resolves the end
    with a ListOffsets only once it starts fetching; on a loaded machine that came after the warm-up had
    ended, and the records measured before it were never read (the run failed, "received N of M")."""
    return [confluent_kafka.TopicPartition(topic, p, consumer.get_watermark_offsets(
                confluent_kafka.TopicPartition(topic, p), timeout=COORDINATOR_TIMEOUT_S)[1])
            for p in ASSIGNMENT]  # fmt: skip


def receive(consumer: confluent_kafka.Consumer, samples: list[tuple[int, int]], measured_from: int) -> None:
    """One poll; poll rather than consume(n) because consume waits to fill its batch or time out."""
    message = consumer.poll(0.1)
    received_ns = time.perf_counter_ns()
    if message is None:
        return
    if message.error():
        raise RuntimeError(f"consumer error: {message.error()}")
    (send_ns,) = SEND_TIME.unpack_from(message.value())
    if send_ns >= measured_from:
        samples.append((send_ns, received_ns - send_ns))


def window_percentiles(latencies_ns: list[int]) -> dict[str, Stats]:
    """Each percentile over each of WINDOWS consecutive slices, in microseconds."""
    size = len(latencies_ns) // WINDOWS
    windows = [sorted(latencies_ns[i * size : (i + 1) * size]) for i in range(WINDOWS)]
    return {name: Stats.of([percentile(w, q) / 1000 for w in windows]) for name, q in PERCENTILES.items()}


async def measure_on_fresh_cluster(root: Path, bytes_per_s: float, warmup_s: float, measure_s: float,
                                   variant: ProducerVariant) -> RateRun:  # fmt: skip
    """A cluster per rate, its directory deleted afterwards, so that the rates do not pile up page cache
    (this kind of VM's memory reclaim makes writes slower once a few GB have)."""
    async with replicated_cluster(root) as cluster:
        await cluster.controller.create_topic(TOPIC, ASSIGNMENT, {"min.insync.replicas": "2"})
        # Blocking clients run in a thread: the controller in this loop must keep answering the brokers.
        broker_pids = [broker.ready.pid for broker in cluster.brokers.values()]
        return await asyncio.to_thread(
            measure_rate, cluster.bootstrap, TOPIC, bytes_per_s, warmup_s, measure_s, variant, broker_pids
        )


def run(quick: bool, workdir: Path) -> list[Result]:
    rates = [2e6] if quick else [10e6, 50e6, 100e6]  # quick: a rate any loaded CI machine sustains
    warmup_s, measure_s = (0.5, 2.0) if quick else (3.0, 15.0)
    with echo_server() as address:
        loopback_round_trips(address, VALUE_BYTES, 2000)  # warm-up
        round_trips = window_percentiles(
            loopback_round_trips(address, VALUE_BYTES, 10_000 if quick else 150_000)
        )
    results = []
    for rate, variant in [(rate, variant) for variant in VARIANTS for rate in rates]:
        cluster_dir = workdir / f"replicated-latency-{rate:.0f}-{variant.linger_ms}-{variant.idempotent:d}"
        run_ = asyncio.run(measure_on_fresh_cluster(cluster_dir, rate, warmup_s, measure_s, variant))
        if run_.achieved_bytes_per_s < SUSTAINED_FRACTION * rate:
            print(f"{NAME}: skipped {rate / 1e6:g} MB/s, {variant.label()}: the producer reached only "
                  f"{run_.achieved_bytes_per_s / 1e6:.1f} MB/s", file=sys.stderr)  # fmt: skip
            continue
        if len(run_.latencies_ns) < run_.sent:
            raise RuntimeError(
                f"{rate / 1e6:g} MB/s: received {len(run_.latencies_ns)} of {run_.sent} records"
            )
        ordered = sorted(run_.latencies_ns)
        extra = {"target_bytes_per_s": rate, "achieved_bytes_per_s": run_.achieved_bytes_per_s, "linger_ms": variant.linger_ms,
                 "idempotent": variant.idempotent, "records": run_.sent, "librdkafka_producer_us": run_.client_latencies_us, "busy_cores": run_.busy_cores,
                 "overall_us": {name: percentile(ordered, q) / 1000 for name, q in PERCENTILES.items()}}  # fmt: skip
        for name, stats in window_percentiles(run_.latencies_ns).items():
            results.append(Result(NAME, case_name(rate, variant, name), "us", stats,
                                  f"TCP round trip {name}", round_trips[name].median, extra))  # fmt: skip
    return results


def case_name(bytes_per_s: float, variant: ProducerVariant, percentile_name: str) -> str:
    """The first variant's rows keep their earlier names, so that `replog bench compare` matches older runs."""
    label = "" if variant == VARIANTS[0] else f", {variant.label()}"
    return f"RF=3 acks=all, {bytes_per_s / 1e6:g} MB/s{label}, {percentile_name}"
