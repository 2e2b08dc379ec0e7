"""`replog chaos`: a Jepsen-style run against a local three-broker cluster.

A controller (in this process) and three broker processes; topic `chaos` with three partitions, RF=3,
min.insync.replicas=2 and unclean leader election off. Producer threads (confluent-kafka, acks=all,
enable.idempotence=true) write unique values `p<i>-<n>` round-robin over the partitions while the nemesis
plays its seeded schedule (replog/chaos/nemesis.py): SIGKILL and restart brokers, SIGSTOP and SIGCONT
them, cut network links around a broker (refused or blackholed, through the proxies LocalCluster puts in
front of every broker and of the controller) and heal them, restart the controller or stop it for a while.
Before each fault the run waits (bounded by ISR_WHOLE_TIMEOUT_S) until every ISR holds every replica again,
so faults never pile up beyond what min.insync.replicas=2 survives; the wait shifts the rest of the schedule
and is reported. A reader consumes every partition (read_committed, up to the HW) while the faults go on.

Then everything is healed, the producers flush, the run waits (bounded) until every ISR holds every replica,
reads every partition from offset 0 up to its high watermark, and checks:

- the history, with the queue checker (replog/chaos/checker.py): lost, duplicated, divergent offsets,
  non-monotonic offsets, unexpected values, reads during the faults that the final read contradicts,
  definitely failed writes that were read; other failed writes count as indeterminate;
- the replicas: every replica of a partition holds the same batches (offsets, CRC, leader epoch, producer
  id and sequence, as `replog log dump` shows them) below the high watermark, with no gap from offset 0;
- catching up: once the ISRs are whole and the producers are done, every replica's high watermark
  (its replication-offset-checkpoint) reaches its log end offset, the same on every replica, within
  HW_CATCH_UP_BOUND_S.

The history (every write and its outcome, both reads) and the report go to history.json and report.json
in the data directory; the seed replays the schedule.
"""

import asyncio
import dataclasses
import json
import os
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka

from ..harness.local_cluster import LocalCluster
from ..log.checkpoint import OffsetCheckpointFile
from ..log.dump import dump_log_file
from ..log.log_manager import HIGH_WATERMARK_CHECKPOINT
from . import nemesis
from .checker import ANOMALY_CLASSES, DEFINITE_FAILURES, CheckResult, History, check

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
# Before a fault: the last one's broker has rejoined every ISR (replica.lag.time.max.ms is 2 s; a restarted
# broker must also recover its log and catch up) well within this, on a loaded 2-core machine.
ISR_WHOLE_TIMEOUT_S = 30.0
# The stated bound: with the ISRs whole and no more writes, followers fetch every replica.fetch.wait.max.ms
# (200 ms) and learn the leader's HW on the next fetch; HWs are checkpointed every 500 ms.
HW_CATCH_UP_BOUND_S = 10.0
FILE_POLL_INTERVAL_S = 0.2  # between scans of the replicas' files
CONSUMER_CONFIG = {
    "enable.auto.commit": False, "log_level": 2,
    # A fetch from a blackholed leader gives up after this, so the reader moves on to the next leader.
    "socket.timeout.ms": 5_000,
}


@dataclass
class ChaosReport:
    seed: int
    duration: float
    faults: tuple[str, ...]
    schedule: list[nemesis.Action]
    performed_at: list[float] = field(default_factory=list)  # when each action of the schedule ran
    isr_waits: list[float] = field(default_factory=list)  # before each fault: seconds until the ISRs were whole
    isrs_not_whole: list[str] = field(default_factory=list)  # faults begun after ISR_WHOLE_TIMEOUT_S anyway
    nemesis_errors: list[str] = field(default_factory=list)
    attempted: int = 0
    acknowledged: int = 0
    acknowledged_without_offset: int = 0  # librdkafka's implicit acks (see checker.History)
    failed: int = 0
    definitely_failed: int = 0
    failure_reasons: Counter = field(default_factory=Counter)
    producer_fatal_errors: list[str] = field(default_factory=list)
    read_during_faults: int = 0
    reader_errors: Counter = field(default_factory=Counter)  # the reader's errors during the faults, by name
    converged_after: float | None = None  # seconds from healing to whole ISRs; None: never
    unconverged_state: str = ""  # the controller's view when convergence timed out
    hw_caught_up_after: float | None = None  # seconds from whole ISRs to HW = LEO everywhere; None: never
    hw_lagging: list[str] = field(default_factory=list)  # replicas whose HW had not reached LEO in time
    high_watermarks: dict[int, int] = field(default_factory=dict)
    read: int = 0
    incomplete_reads: list[int] = field(default_factory=list)  # partitions not read up to their HW
    check: CheckResult = field(default_factory=CheckResult)
    replica_divergence: list[str] = field(default_factory=list)
    elapsed: float = 0.0

    def count(self, op: str) -> int:
        return sum(1 for a in self.schedule[: len(self.performed_at)] if a.op == op)

    @property
    def indeterminate(self) -> int:
        """Writes whose outcome is unknown: failed with an error that leaves it open, or never reported."""
        return self.attempted - self.acknowledged - self.definitely_failed

    @property
    def problems(self) -> list[str]:
        """Everything that makes the run fail: anomalies first, then what kept the check from being whole."""
        found = [f"{n} {anomaly}" for anomaly, n in self.check.counts.items() if n]
        if self.replica_divergence:
            found.append(f"{len(self.replica_divergence)} partitions with divergent replicas")
        if self.converged_after is None:
            found.append("the ISRs never became whole")
        elif self.hw_caught_up_after is None:
            found.append(f"high watermarks did not reach the log end offsets within {HW_CATCH_UP_BOUND_S:g}s")
        if self.isrs_not_whole:
            found.append(f"{len(self.isrs_not_whole)} faults began with an ISR short")
        if self.reader_errors.get("_AUTO_OFFSET_RESET"):
            found.append("the reader during the faults was told its offset is out of range")
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
        lines += [f"  fault begun with an ISR short: {e}" for e in self.isrs_not_whole]
        lines.append(f"nemesis: {self.count(nemesis.KILL_BROKER)} kills, {self.count(nemesis.PAUSE_BROKER)} "
                     f"pauses, {self.count(nemesis.CUT_NETWORK)} network cuts, "
                     f"{self.count(nemesis.RESTART_CONTROLLER)} controller restarts, "
                     f"{self.count(nemesis.STOP_CONTROLLER)} controller downtimes")
        if self.isr_waits:
            lines.append(f"waits for whole ISRs before faults: max {max(self.isr_waits):.1f}s, total "
                         f"{sum(self.isr_waits):.1f}s over {len(self.isr_waits)} faults")
        never_reported = self.attempted - self.acknowledged - self.failed
        lines.append(f"writes: {self.attempted} attempted, {self.acknowledged} acknowledged, {self.failed} "
                     f"failed ({self.definitely_failed} definitely), {never_reported} never reported; "
                     f"{self.indeterminate} indeterminate")
        if self.acknowledged_without_offset:
            lines.append(f"  acknowledged without an offset: {self.acknowledged_without_offset}")
        lines += [f"  failed with {reason}: {n}" for reason, n in self.failure_reasons.most_common()]
        lines += [f"  producer fatal error: {e}" for e in self.producer_fatal_errors]
        lines.append(f"read during the faults: {self.read_during_faults} records"
                     + "".join(f"; {n} x {error}" for error, n in self.reader_errors.most_common()))
        lines.append("converged: " + ("never" if self.converged_after is None else
                                      f"every ISR whole {self.converged_after:.1f}s after healing"))
        if self.unconverged_state:
            lines.append(f"  at the time-out: {self.unconverged_state}")
        lines.append("caught up: " + (
            f"HW = LEO on every replica {self.hw_caught_up_after:.1f}s after that (bound {HW_CATCH_UP_BOUND_S:g}s)"
            if self.hw_caught_up_after is not None else "not measured" if self.converged_after is None
            else f"not within {HW_CATCH_UP_BOUND_S:g}s"))
        lines += [f"  {lag}" for lag in self.hw_lagging]
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
    """One producer writing `<name>-<n>` round-robin over the topic's partitions at a steady rate until told
    to stop, then flushing; its delivery reports are the history's acknowledgements and failures. The chaos
    run's defaults: an idempotent acks=all producer of `chaos`; the crash loop passes its own."""

    def __init__(self, name: str, bootstrap: str, stop: threading.Event, *, topic: str = TOPIC,
                 partitions: int = len(ASSIGNMENT), config: dict = PRODUCER_CONFIG,
                 records_per_second: float = RECORDS_PER_SECOND, encode: Callable[[str], bytes] = str.encode,
                 decode: Callable[[bytes], str] = bytes.decode) -> None:  # fmt: skip
        super().__init__(name=f"load-{name}", daemon=True)
        self.prefix = name
        self.bootstrap = bootstrap
        self.stop = stop
        self.topic, self.partitions, self.config = topic, partitions, config
        self.interval = 1 / records_per_second
        self.encode, self.decode = encode, decode
        self.attempted: list[str] = []
        self.acknowledged: dict[str, tuple[int, int]] = {}
        self.failed: dict[str, str] = {}
        self.fatal: list[str] = []

    def run(self) -> None:
        producer = confluent_kafka.Producer({"bootstrap.servers": self.bootstrap, **self.config,
                                             "error_cb": self._on_error})
        n = 0
        while not self.stop.is_set() and not self.fatal:
            value = f"{self.prefix}-{n}"
            try:
                producer.produce(self.topic, self.encode(value), partition=n % self.partitions,
                                 on_delivery=self._on_delivery)
            except BufferError:  # librdkafka's queue is full: serve delivery reports, then try again
                producer.poll(self.interval)
                continue
            except confluent_kafka.KafkaException as e:  # a fatal error: this producer can do no more
                self.fatal.append(str(e))
                break
            self.attempted.append(value)
            n += 1
            producer.poll(0)
            self.stop.wait(self.interval)
        producer.flush(FLUSH_TIMEOUT_S)

    def _on_delivery(self, err, msg) -> None:
        value = self.decode(msg.value())
        if err is None:
            self.acknowledged[value] = (msg.partition(), msg.offset())
        else:
            self.failed[value] = err.name()

    def _on_error(self, err) -> None:
        if err.fatal():
            self.fatal.append(str(err))


class LiveReader(threading.Thread):
    """A consumer reading every partition from the start while the faults go on (read_committed: what it
    sees is below the HW, so the final read must hold it at the same offsets)."""

    def __init__(self, bootstrap: str, stop: threading.Event) -> None:
        super().__init__(name="chaos-reader", daemon=True)
        self.bootstrap = bootstrap
        self.stop = stop
        self.read: dict[int, list[tuple[int, str]]] = {p: [] for p in ASSIGNMENT}
        self.errors: Counter = Counter()

    def run(self) -> None:
        # auto.offset.reset=error: an offset the reader reached is below the HW, so it can never be out of
        # range at any later leader; if it is, that is a finding, not something to paper over.
        consumer = confluent_kafka.Consumer({"bootstrap.servers": self.bootstrap, **CONSUMER_CONFIG,
                                             "group.id": "replog-chaos-live-reader", "auto.offset.reset": "error",
                                             "isolation.level": "read_committed"})
        try:
            consumer.assign([confluent_kafka.TopicPartition(TOPIC, p, confluent_kafka.OFFSET_BEGINNING)
                             for p in ASSIGNMENT])
            while not self.stop.is_set():
                for msg in consumer.consume(CONSUME_BATCH, CONSUME_POLL_S):
                    if msg.error() is None:
                        self.read[msg.partition()].append((msg.offset(), msg.value().decode(errors="replace")))
                    else:
                        self.errors[msg.error().name()] += 1
        finally:
            consumer.close()


async def run_chaos(root: Path, *, duration: float, faults: tuple[str, ...], seed: int) -> ChaosReport:
    """Run one chaos test with its cluster under root; every process it starts is stopped when it returns.
    The history and the report are written to root/history.json and root/report.json."""
    started = time.monotonic()
    cluster = LocalCluster(root, broker_proxies=True)
    report = ChaosReport(seed, duration, faults, nemesis.schedule(seed, duration, faults, BROKERS))
    stop_producing = threading.Event()
    stop_reading = threading.Event()
    producers: list[LoadProducer] = []
    reader: LiveReader | None = None
    history: History | None = None
    try:
        await cluster.start()
        await cluster.controller.create_topic(TOPIC, ASSIGNMENT, TOPIC_CONFIGS)
        producers += [LoadProducer(f"p{i}", cluster.bootstrap, stop_producing) for i in range(PRODUCERS)]
        reader = LiveReader(cluster.bootstrap, stop_reading)
        for thread in (*producers, reader):
            thread.start()
        print(f"cluster up in {root}; producing while the nemesis runs {len(report.schedule)} actions",
              flush=True)
        await play(cluster, report, time.monotonic())
        stop_reading.set()
        await heal(cluster, report)
        healed = time.monotonic()
        stop_producing.set()
        for thread in (*producers, reader):
            await asyncio.to_thread(thread.join)
        record_writes(report, producers)
        report.read_during_faults = sum(len(records) for records in reader.read.values())
        report.reader_errors = reader.errors
        try:
            await cluster.wait_for(lambda: isrs_whole(cluster), CONVERGENCE_TIMEOUT_S, "every ISR to be whole")
            report.converged_after = time.monotonic() - healed
            await measure_catch_up(cluster, report)
        except AssertionError:  # reported as a problem; still read and check what is there
            report.unconverged_state = describe_partitions(cluster)
        read = await asyncio.to_thread(read_all, cluster.bootstrap, report)
        history = History({v for p in producers for v in p.attempted},
                          {v: at for p in producers for v, at in p.acknowledged.items()}, read,
                          failed={v: e for p in producers for v, e in p.failed.items()},
                          read_during_faults=reader.read)
        report.check = check(history)
        if report.converged_after is not None:
            report.replica_divergence = await compare_replicas(cluster, report.high_watermarks)
    finally:
        stop_producing.set()
        stop_reading.set()
        resume_all(cluster)  # a stopped process would not see SIGTERM
        await cluster.stop()
        for thread in (*producers, *([reader] if reader else [])):
            if thread.is_alive():
                await asyncio.to_thread(thread.join)
        report.elapsed = time.monotonic() - started
        write_json(root, report, history)
    return report


async def play(cluster: LocalCluster, report: ChaosReport, started: float) -> None:
    """Each action at its time (or as soon as the one before it is done: a restart waits until the broker
    is unfenced), then the rest of the duration. Before a fault, wait until every ISR is whole; the wait
    postpones the rest of the schedule, so each fault still lasts as long as the seed says."""
    postponed = 0.0
    for action in report.schedule:
        await asyncio.sleep(max(0.0, started + postponed + action.at - time.monotonic()))
        if action.starts_fault:
            waited = await wait_for_whole_isrs(cluster, report, action)
            report.isr_waits.append(waited)
            postponed = max(postponed, time.monotonic() - started - action.at)
        report.performed_at.append(time.monotonic() - started)
        print(f"nemesis: {action}", flush=True)
        try:
            await perform(cluster, action)
        except (AssertionError, RuntimeError, TimeoutError, OSError) as e:  # heal() brings the broker back
            report.nemesis_errors.append(f"{action}: {e}")
    # The load runs the whole duration, postponements included.
    await asyncio.sleep(max(0.0, started + postponed + report.duration - time.monotonic()))


async def wait_for_whole_isrs(cluster: LocalCluster, report: ChaosReport, action: nemesis.Action) -> float:
    """Seconds until every ISR held every replica (ISR_WHOLE_TIMEOUT_S if it never did: then noted)."""
    began = time.monotonic()
    try:
        await cluster.wait_for(lambda: isrs_whole(cluster), ISR_WHOLE_TIMEOUT_S, "every ISR to be whole")
    except AssertionError:
        report.isrs_not_whole.append(f"{action}: {describe_partitions(cluster)}")
    return time.monotonic() - began


async def perform(cluster: LocalCluster, action: nemesis.Action) -> None:
    if action.op == nemesis.KILL_BROKER:
        await cluster.kill(action.broker)
    elif action.op == nemesis.START_BROKER:
        await cluster.restart(action.broker)
    elif action.op == nemesis.PAUSE_BROKER:
        cluster.brokers[action.broker].pause()
    elif action.op == nemesis.RESUME_BROKER:
        cluster.brokers[action.broker].resume()
    elif action.op == nemesis.CUT_NETWORK:
        cut = action.cut
        cluster.partition(action.broker, cut.peers, controller=cut.controller, clients=cut.clients, mode=cut.mode)
    elif action.op == nemesis.HEAL_NETWORK:
        cut = action.cut
        cluster.heal_partition(action.broker, cut.peers, controller=cut.controller, clients=cut.clients)
    elif action.op == nemesis.RESTART_CONTROLLER:
        await cluster.restart_controller()
    elif action.op == nemesis.STOP_CONTROLLER:
        await cluster.stop_controller()
    elif action.op == nemesis.START_CONTROLLER:
        await cluster.start_controller()
    else:
        raise ValueError(f"unknown nemesis action {action}")


def resume_all(cluster: LocalCluster) -> None:
    for broker in cluster.brokers.values():
        broker.resume()


async def heal(cluster: LocalCluster, report: ChaosReport) -> None:
    """The schedule heals its own faults; this covers an action that failed half-way."""
    resume_all(cluster)
    cluster.heal_network()
    if not cluster.controller_running:
        try:
            await cluster.start_controller()
        except OSError as e:
            report.nemesis_errors.append(f"heal: start the controller: {e}")
    for node_id, broker in cluster.brokers.items():
        if not broker.running:
            try:
                await cluster.restart(node_id)
            except (AssertionError, RuntimeError, TimeoutError) as e:
                report.nemesis_errors.append(f"heal: start broker {node_id}: {e}")


def isrs_whole(cluster: LocalCluster, topic: str = TOPIC, assignment: dict[int, list[int]] = ASSIGNMENT) -> bool:
    """Whether every partition of the topic has all its replicas in its ISR, led by one of them."""
    for partition, replicas in assignment.items():
        registration = cluster.controller.registration(topic, partition)
        if set(registration.isr) != set(replicas) or registration.leader not in replicas:
            return False
    return True


def describe_partitions(cluster: LocalCluster) -> str:
    registrations = [cluster.controller.registration(TOPIC, p) for p in ASSIGNMENT]
    return (f"active brokers {sorted(cluster.active_brokers())}; " + "; ".join(
        f"partition {r.partition} leader {r.leader} epoch {r.leader_epoch} ISR {list(r.isr)}" for r in registrations))


def replica_positions(cluster: LocalCluster) -> dict[tuple[int, int], tuple[int | None, int]]:
    """(partition, replica) -> (its checkpointed HW or None, its LEO), read from the replica's files."""
    positions = {}
    for node_id, broker in cluster.brokers.items():
        try:
            checkpointed = OffsetCheckpointFile(broker.log_dir / HIGH_WATERMARK_CHECKPOINT).read()
        except (OSError, ValueError):  # not written yet, or being replaced: no HW known
            checkpointed = {}
        for partition, replicas in ASSIGNMENT.items():
            if node_id in replicas:
                batches = [b for b in dump_log_file(cluster.log_dir(node_id, TOPIC, partition)) if "error" not in b]
                end = batches[-1]["last_offset"] + 1 if batches else 0
                positions[partition, node_id] = (checkpointed.get((TOPIC, partition)), end)
    return positions


async def measure_catch_up(cluster: LocalCluster, report: ChaosReport) -> None:
    """How long after the ISRs are whole every replica's HW equals its LEO, the same on all replicas."""
    began = time.monotonic()
    positions: dict[tuple[int, int], tuple[int | None, int]] = {}

    def caught_up() -> bool:
        positions.update(replica_positions(cluster))
        return all(hw == end for hw, end in positions.values()) and all(
            len({end for (p, _), (_, end) in positions.items() if p == partition}) == 1 for partition in ASSIGNMENT)

    if await poll_off_loop(caught_up, HW_CATCH_UP_BOUND_S):
        report.hw_caught_up_after = time.monotonic() - began
    else:
        report.hw_lagging = [f"partition {p} replica {n}: HW {hw}, LEO {end}"
                             for (p, n), (hw, end) in sorted(positions.items())]


def record_writes(report: ChaosReport, producers: list[LoadProducer]) -> None:
    report.attempted = sum(len(p.attempted) for p in producers)
    report.acknowledged = sum(len(p.acknowledged) for p in producers)
    report.acknowledged_without_offset = sum(1 for p in producers for _, offset in p.acknowledged.values()
                                             if offset is None)
    report.failed = sum(len(p.failed) for p in producers)
    report.failure_reasons = Counter(reason for p in producers for reason in p.failed.values())
    report.definitely_failed = sum(n for reason, n in report.failure_reasons.items() if reason in DEFINITE_FAILURES)
    report.producer_fatal_errors = [e for p in producers for e in p.fatal]


def write_json(root: Path, report: ChaosReport, history: History | None) -> None:
    """report.json: the report's fields and verdict; history.json: every write's outcome and both reads."""
    root.mkdir(parents=True, exist_ok=True)
    fields = dataclasses.asdict(report)
    # asdict rebuilds a Counter from its (key, count) pairs as if they were keys: take them as they are.
    fields.update(failure_reasons=dict(report.failure_reasons), reader_errors=dict(report.reader_errors))
    fields.update(ok=report.ok, problems=report.problems, indeterminate=report.indeterminate,
                  hw_catch_up_bound_s=HW_CATCH_UP_BOUND_S, isr_whole_timeout_s=ISR_WHOLE_TIMEOUT_S)
    (root / "report.json").write_text(json.dumps(fields, indent=1, default=str))
    if history is not None:
        (root / "history.json").write_text(json.dumps({
            "attempted": sorted(history.attempted),
            "acknowledged": history.acknowledged,
            "failed": history.failed,
            "read": history.read,
            "read_during_faults": history.read_during_faults,
        }))


def high_watermark(consumer: confluent_kafka.Consumer, partition: int) -> int:
    """The partition's HW from its leader, asking again (bounded) while the client's metadata is stale."""
    deadline = time.monotonic() + WATERMARK_TIMEOUT_S
    tp = confluent_kafka.TopicPartition(TOPIC, partition)
    while True:
        try:
            return consumer.get_watermark_offsets(tp, WATERMARK_TIMEOUT_S)[1]
        except confluent_kafka.KafkaException:  # NOT_LEADER_FOR_PARTITION and the like; the last one is raised
            if time.monotonic() > deadline:
                raise
            time.sleep(CONSUME_POLL_S)  # librdkafka refreshes its metadata meanwhile


def read_all(bootstrap: str, report: ChaosReport) -> dict[int, list[tuple[int, str]]]:
    """Every partition from offset 0 up to its high watermark: (offset, value) in the order read."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, **CONSUMER_CONFIG,
                                         "group.id": "replog-chaos-checker", "enable.partition.eof": True})
    try:
        for partition in ASSIGNMENT:
            report.high_watermarks[partition] = high_watermark(consumer, partition)
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

    await poll_off_loop(all_agree, REPLICAS_TIMEOUT_S)  # if they never agree, the differences are the finding
    return [f"partition {p}: {d}" for p, d in sorted(differences.items()) if d]


async def poll_off_loop(check: Callable[[], bool], timeout: float) -> bool:
    """Poll a check that reads log files in a worker thread, so that the controller, which shares this event
    loop, keeps answering heartbeats (run on the loop, a scan of every replica's log got all brokers fenced);
    whether it passed within timeout."""
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(check):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(FILE_POLL_INTERVAL_S)
    return True


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
