"""`replog chaos`: a Jepsen-style run against a local three-broker cluster.

A controller (in this process) and three broker processes; topic `chaos` with three partitions, RF=3,
min.insync.replicas=2 and unclean leader election off. Producer threads (confluent-kafka, acks=all,
enable.idempotence=true) write unique values `p<i>-<n>` round-robin over the partitions while the nemesis
plays its seeded schedule (replog/chaos/nemesis.py): SIGKILL and restart brokers, SIGSTOP and SIGCONT
them, restart the controller. Then everything is healed, the producers flush, the run waits (bounded) until
every ISR holds every replica, reads every partition from offset 0 up to its high watermark, and checks:

- the history, with the queue checker (replog/chaos/checker.py): lost, duplicated, divergent offsets,
  non-monotonic offsets, unexpected values;
- the replicas: every replica of a partition holds the same batches (offsets, CRC, leader epoch, producer
  id and sequence, as `replog log dump` shows them) below the high watermark, with no gap from offset 0.

Network partitions between brokers are not among the faults yet.
"""

import asyncio
import os
import shutil
import signal
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka

from ..local_cluster import LocalCluster
from ..log.dump import dump_log_file
from . import nemesis
from .checker import ANOMALY_CLASSES, CheckResult, History, check

TOPIC = "chaos"
BROKERS = (1, 2, 3)  # LocalCluster's node ids
ASSIGNMENT = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}  # each broker leads one partition at first
TOPIC_CONFIGS = {"min.insync.replicas": "2", "unclean.leader.election.enable": "false"}
PRODUCERS = 3
RECORDS_PER_SECOND = 100  # per producer: load that 2 cores carry while brokers restart
PRODUCER_CONFIG = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    # A request to a paused leader must give up well before the message does, so the message can be
    # retried at the new leader; a message outlives any single fault of the schedule.
    "request.timeout.ms": 5_000,
    "message.timeout.ms": 60_000,
    "topic.metadata.refresh.interval.ms": 1_000,
    "log_level": 2,  # connections refused and reset are the point of the run, not news
}
FLUSH_TIMEOUT_S = 70.0  # past message.timeout.ms: every message is then acknowledged or failed
CONVERGENCE_TIMEOUT_S = 60.0
CONSUME_TIMEOUT_S = 60.0
REPLICAS_TIMEOUT_S = 30.0
WATERMARK_TIMEOUT_S = 10.0
CONSUME_BATCH = 1_000
CONSUME_POLL_S = 0.5


@dataclass
class ChaosReport:
    seed: int
    duration: float
    faults: tuple[str, ...]
    schedule: list[nemesis.Action]
    performed_at: list[float] = field(default_factory=list)  # when each action of the schedule ran
    nemesis_errors: list[str] = field(default_factory=list)
    attempted: int = 0
    acknowledged: int = 0
    failed: int = 0
    failure_reasons: Counter = field(default_factory=Counter)
    producer_fatal_errors: list[str] = field(default_factory=list)
    converged_after: float | None = None  # seconds from healing to whole ISRs; None: never
    unconverged_state: str = ""  # the controller's view when convergence timed out
    high_watermarks: dict[int, int] = field(default_factory=dict)
    read: int = 0
    incomplete_reads: list[int] = field(default_factory=list)  # partitions not read up to their HW
    check: CheckResult = field(default_factory=CheckResult)
    replica_divergence: list[str] = field(default_factory=list)
    elapsed: float = 0.0

    def count(self, op: str) -> int:
        return sum(1 for a in self.schedule[: len(self.performed_at)] if a.op == op)

    @property
    def problems(self) -> list[str]:
        """Everything that makes the run fail: anomalies first, then what kept the check from being whole."""
        found = [f"{n} {anomaly}" for anomaly, n in self.check.counts.items() if n]
        if self.replica_divergence:
            found.append(f"{len(self.replica_divergence)} partitions with divergent replicas")
        if self.converged_after is None:
            found.append("the ISRs never became whole")
        if self.incomplete_reads:
            found.append(f"partitions {self.incomplete_reads} not read up to their high watermark")
        if self.nemesis_errors:
            found.append(f"{len(self.nemesis_errors)} nemesis actions failed")
        return found

    @property
    def ok(self) -> bool:
        return not self.problems

    def format(self) -> str:
        lines = [f"replog chaos: seed {self.seed}, {self.duration:g}s, nemesis {','.join(self.faults)}",
                 "schedule (planned time, action, time performed):"]
        for action, at in zip(self.schedule, self.performed_at, strict=False):
            lines.append(f"  {action}  (performed at {at:.2f}s)")
        lines += [f"  error: {e}" for e in self.nemesis_errors]
        lines.append(f"nemesis: {self.count(nemesis.KILL_BROKER)} kills, {self.count(nemesis.PAUSE_BROKER)} "
                     f"pauses, {self.count(nemesis.RESTART_CONTROLLER)} controller restarts")
        unknown = self.attempted - self.acknowledged - self.failed
        lines.append(f"writes: {self.attempted} attempted, {self.acknowledged} acknowledged, {self.failed} "
                     f"failed, {unknown} unknown")
        lines += [f"  failed with {reason}: {n}" for reason, n in self.failure_reasons.most_common()]
        lines += [f"  producer fatal error: {e}" for e in self.producer_fatal_errors]
        lines.append("converged: " + ("never" if self.converged_after is None else
                                      f"every ISR whole {self.converged_after:.1f}s after healing"))
        if self.unconverged_state:
            lines.append(f"  at the time-out: {self.unconverged_state}")
        lines.append(f"read: {self.read} records; high watermarks "
                     + ", ".join(f"{p}: {hw}" for p, hw in sorted(self.high_watermarks.items())))
        lines.append("anomalies:")
        for anomaly in ANOMALY_CLASSES:
            lines.append(f"  {anomaly}: {self.check.counts[anomaly]}")
            lines += [f"    e.g. {example}" for example in self.check.examples[anomaly]]
        lines.append(f"  divergent replicas: {len(self.replica_divergence)}")
        lines += [f"    {d}" for d in self.replica_divergence]
        verdict = "OK" if self.ok else "FAILED: " + "; ".join(self.problems)
        lines.append(f"result: {verdict} (seed {self.seed}, {self.elapsed:.0f}s)")
        return "\n".join(lines)


class LoadProducer(threading.Thread):
    """One idempotent acks=all producer writing `<name>-<n>` at a steady rate until told to stop, then
    flushing; its delivery reports are the history's acknowledgements and failures."""

    def __init__(self, name: str, bootstrap: str, stop: threading.Event) -> None:
        super().__init__(name=f"chaos-{name}", daemon=True)
        self.prefix = name
        self.bootstrap = bootstrap
        self.stop = stop
        self.attempted: list[str] = []
        self.acknowledged: dict[str, tuple[int, int]] = {}
        self.failed: dict[str, str] = {}
        self.fatal: list[str] = []

    def run(self) -> None:
        producer = confluent_kafka.Producer({"bootstrap.servers": self.bootstrap, **PRODUCER_CONFIG,
                                             "error_cb": self._on_error})
        interval = 1 / RECORDS_PER_SECOND
        n = 0
        while not self.stop.is_set() and not self.fatal:
            value = f"{self.prefix}-{n}"
            try:
                producer.produce(TOPIC, value.encode(), partition=n % len(ASSIGNMENT), on_delivery=self._on_delivery)
            except BufferError:  # librdkafka's queue is full: serve delivery reports, then try again
                producer.poll(interval)
                continue
            except confluent_kafka.KafkaException as e:  # a fatal error: this producer can do no more
                self.fatal.append(str(e))
                break
            self.attempted.append(value)
            n += 1
            producer.poll(0)
            self.stop.wait(interval)
        producer.flush(FLUSH_TIMEOUT_S)

    def _on_delivery(self, err, msg) -> None:
        value = msg.value().decode()
        if err is None:
            self.acknowledged[value] = (msg.partition(), msg.offset())
        else:
            self.failed[value] = err.name()

    def _on_error(self, err) -> None:
        if err.fatal():
            self.fatal.append(str(err))


async def run_chaos(root: Path, *, duration: float, faults: tuple[str, ...], seed: int) -> ChaosReport:
    """Run one chaos test with its cluster under root; every process it starts is stopped when it returns."""
    started = time.monotonic()
    cluster = LocalCluster(root)
    report = ChaosReport(seed, duration, faults, nemesis.schedule(seed, duration, faults, BROKERS))
    stop_producing = threading.Event()
    producers: list[LoadProducer] = []
    try:
        await cluster.start()
        await cluster.controller.create_topic(TOPIC, ASSIGNMENT, TOPIC_CONFIGS)
        producers += [LoadProducer(f"p{i}", cluster.bootstrap, stop_producing) for i in range(PRODUCERS)]
        for producer in producers:
            producer.start()
        print(f"cluster up in {root}; producing while the nemesis runs {len(report.schedule)} actions",
              flush=True)
        await play(cluster, report, time.monotonic())
        await heal(cluster, report)
        healed = time.monotonic()
        stop_producing.set()
        for producer in producers:
            await asyncio.to_thread(producer.join)
        record_writes(report, producers)
        try:
            await cluster.wait_for(lambda: isrs_whole(cluster), CONVERGENCE_TIMEOUT_S, "every ISR to be whole")
            report.converged_after = time.monotonic() - healed
        except AssertionError:  # reported as a problem; still read and check what is there
            report.unconverged_state = describe_partitions(cluster)
        read = await asyncio.to_thread(read_all, cluster.bootstrap, report)
        report.check = check(History({v for p in producers for v in p.attempted},
                                     {v: at for p in producers for v, at in p.acknowledged.items()}, read))
        if report.converged_after is not None:
            report.replica_divergence = await compare_replicas(cluster, report.high_watermarks)
    finally:
        stop_producing.set()
        resume_all(cluster)  # a stopped process would not see SIGTERM
        await cluster.stop()
        for producer in producers:
            if producer.is_alive():
                await asyncio.to_thread(producer.join)
    report.elapsed = time.monotonic() - started
    return report


async def play(cluster: LocalCluster, report: ChaosReport, started: float) -> None:
    """Each action at its time (or as soon as the one before it is done: a restart waits until the broker
    is unfenced), then the rest of the duration."""
    for action in report.schedule:
        await asyncio.sleep(max(0.0, started + action.at - time.monotonic()))
        report.performed_at.append(time.monotonic() - started)
        print(f"nemesis: {action}", flush=True)
        try:
            await perform(cluster, action)
        except (AssertionError, RuntimeError, TimeoutError, OSError) as e:  # heal() brings the broker back
            report.nemesis_errors.append(f"{action}: {e}")
    await asyncio.sleep(max(0.0, started + report.duration - time.monotonic()))  # load runs the whole duration


async def perform(cluster: LocalCluster, action: nemesis.Action) -> None:
    if action.op == nemesis.KILL_BROKER:
        await cluster.kill(action.broker)
    elif action.op == nemesis.START_BROKER:
        await cluster.restart(action.broker)
    elif action.op == nemesis.PAUSE_BROKER:
        os.kill(cluster.brokers[action.broker].proc.pid, signal.SIGSTOP)
    elif action.op == nemesis.RESUME_BROKER:
        os.kill(cluster.brokers[action.broker].proc.pid, signal.SIGCONT)
    elif action.op == nemesis.RESTART_CONTROLLER:
        await cluster.restart_controller()
    else:
        raise ValueError(f"unknown nemesis action {action}")


def resume_all(cluster: LocalCluster) -> None:
    for broker in cluster.brokers.values():
        if broker.proc is not None and broker.proc.poll() is None:
            os.kill(broker.proc.pid, signal.SIGCONT)  # harmless to a running process


async def heal(cluster: LocalCluster, report: ChaosReport) -> None:
    """The schedule heals its own faults; this covers an action that failed half-way."""
    resume_all(cluster)
    for node_id, broker in cluster.brokers.items():
        if broker.proc is None or broker.proc.poll() is not None:
            try:
                await cluster.restart(node_id)
            except (AssertionError, RuntimeError, TimeoutError) as e:
                report.nemesis_errors.append(f"heal: start broker {node_id}: {e}")


def isrs_whole(cluster: LocalCluster) -> bool:
    for partition, replicas in ASSIGNMENT.items():
        registration = cluster.controller.registration(TOPIC, partition)
        if set(registration.isr) != set(replicas) or registration.leader not in replicas:
            return False
    return True


def describe_partitions(cluster: LocalCluster) -> str:
    registrations = [cluster.controller.registration(TOPIC, p) for p in ASSIGNMENT]
    return (f"active brokers {sorted(cluster.active_brokers())}; " + "; ".join(
        f"partition {r.partition} leader {r.leader} epoch {r.leader_epoch} ISR {list(r.isr)}" for r in registrations))


def record_writes(report: ChaosReport, producers: list[LoadProducer]) -> None:
    report.attempted = sum(len(p.attempted) for p in producers)
    report.acknowledged = sum(len(p.acknowledged) for p in producers)
    report.failed = sum(len(p.failed) for p in producers)
    report.failure_reasons = Counter(reason for p in producers for reason in p.failed.values())
    report.producer_fatal_errors = [e for p in producers for e in p.fatal]


def read_all(bootstrap: str, report: ChaosReport) -> dict[int, list[tuple[int, str]]]:
    """Every partition from offset 0 up to its high watermark: (offset, value) in the order read."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "replog-chaos-checker",
                                         "enable.auto.commit": False, "enable.partition.eof": True,
                                         "log_level": 2})
    try:
        for partition in ASSIGNMENT:
            tp = confluent_kafka.TopicPartition(TOPIC, partition)
            report.high_watermarks[partition] = consumer.get_watermark_offsets(tp, WATERMARK_TIMEOUT_S)[1]
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, p, confluent_kafka.OFFSET_BEGINNING)
                         for p in ASSIGNMENT])
        read: dict[int, list[tuple[int, str]]] = {p: [] for p in ASSIGNMENT}
        pending = {p for p, hw in report.high_watermarks.items() if hw > 0}
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(CONSUME_BATCH, CONSUME_POLL_S):
                partition = msg.partition()
                if msg.error() is None:
                    read[partition].append((msg.offset(), msg.value().decode(errors="replace")))
                    reached = msg.offset() + 1
                elif msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    reached = msg.offset()
                else:
                    continue  # transient (a connection, a leader moving): librdkafka retries by itself
                if reached >= report.high_watermarks[partition]:
                    pending.discard(partition)
        report.incomplete_reads = sorted(pending)
        report.read = sum(len(records) for records in read.values())
        return read
    finally:
        consumer.close()


def replica_batches(partition_dir: Path, high_watermark: int) -> list[tuple]:
    """The batches of a replica below the high watermark, as `replog log dump` describes them (without
    file names and positions, which differ between replicas); unreadable data is kept as its error."""
    batches = []
    for entry in dump_log_file(partition_dir):
        if "error" in entry:
            batches.append(("unreadable", entry["error"]))
        elif entry["last_offset"] < high_watermark:
            batches.append((entry["base_offset"], entry["last_offset"], entry["crc"],
                            entry["partition_leader_epoch"], entry["producer_id"], entry["base_sequence"]))
    return batches


def replica_difference(batches: dict[int, list[tuple]], high_watermark: int) -> str | None:
    """Why these replicas' batches below the high watermark are not one gap-free log, or None."""
    first_node, first = next(iter(batches.items()))
    for node, theirs in batches.items():
        if theirs != first:
            at = next((i for i, (a, b) in enumerate(zip(first, theirs, strict=False)) if a != b),
                      min(len(first), len(theirs)))
            return (f"replica {first_node} and replica {node} differ at batch {at}: "
                    f"{first[at] if at < len(first) else 'none'} vs {theirs[at] if at < len(theirs) else 'none'}")
    expected_base = 0
    for batch in first:
        if batch[0] != expected_base:
            return f"every replica lacks offsets {expected_base}..{batch[0] - 1} (batch {batch})"
        expected_base = batch[1] + 1
    if expected_base != high_watermark:
        return f"every replica ends at offset {expected_base - 1}, below the high watermark {high_watermark}"
    return None


async def compare_replicas(cluster: LocalCluster, high_watermarks: dict[int, int]) -> list[str]:
    """Wait (bounded) until each partition's replicas agree below its HW; return the partitions that do not."""
    differences: dict[int, str | None] = {}

    def all_agree() -> bool:
        for partition, replicas in ASSIGNMENT.items():
            batches = {n: replica_batches(cluster.log_dir(n, TOPIC, partition), high_watermarks[partition])
                       for n in replicas}
            differences[partition] = replica_difference(batches, high_watermarks[partition])
        return not any(differences.values())

    try:
        await cluster.wait_for(all_agree, REPLICAS_TIMEOUT_S, "identical replicas")
    except AssertionError:
        pass  # the differences are the finding
    return [f"partition {p}: {d}" for p, d in sorted(differences.items()) if d]


def main(*, duration: float, nemesis_faults: str, seed: int | None, data_dir: Path | None) -> int:
    """The `replog chaos` command: run, print the report, exit 0 only if the run found nothing wrong."""
    faults = nemesis.parse_faults(nemesis_faults)
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "big")  # printed with the report, so the run can be repeated
    root = data_dir or Path(tempfile.mkdtemp(prefix="replog-chaos-"))
    report = asyncio.run(run_chaos(root, duration=duration, faults=faults, seed=seed))
    print(report.format())
    if not report.ok:
        print(f"cluster data and broker output kept in {root}")
        return 1
    if data_dir is None:
        shutil.rmtree(root)
    return 0
