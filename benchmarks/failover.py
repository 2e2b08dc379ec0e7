"""Leader failover on a 3-broker cluster with Kafka's defaults: 1,000 partitions, RF=3, min.insync.replicas=2.

The partitions are one topic, created with one CreateTopics. A round that finds a fenced broker or a changed
partition before the signal fails rather than measure from that state (the brokers must keep heartbeating
while they create 1,000 logs each). The controller assigns the replicas round-robin (Kafka's algorithm, a
random first broker), so broker 1, the victim, leads about a third of the partitions and follows the rest.
Every round is a fresh cluster; the clock starts when the signal is sent, and the controller's state (in
this process) is polled every POLL_INTERVAL_S, which is the resolution of the fenced / elected times.

- SIGKILL: the victim stops heartbeating; the controller fences it once broker.session.timeout.ms (9 s) has
  passed since its last heartbeat (silence is checked every 0.9 s), which takes it out of every ISR and
  moves its leaderships to the next in-sync replica in the same step. The kill comes right after one of the
  victim's heartbeats reached the controller (heartbeats are recorded by wrapping the controller's
  broker_heartbeat), so detection takes the whole timeout: the worst case, the same in every round (at a
  random moment it would come up to one heartbeat interval, 2 s, sooner). A broker whose event loop is busy
  heartbeats late, so a victim may have been silent for a while already: `extra` has the longest gap
  between each broker's heartbeats before the signal (2 s when all is well).
  Figures: until every partition the victim led has another leader on the controller and the brokers have
  applied the change (ClusterController.settle(): every LeaderAndIsr / UpdateMetadata sent so far
  answered); and until a client can write to all of them: a confluent-kafka producer (acks=all, connected
  and with the metadata before the kill) hands one record to each of those partitions at the kill, and the
  clock stops at the last delivery report. That includes librdkafka's refresh of the metadata of topics
  with an unavailable leader, about once a second (often twice: librdkafka's decommissioning of the fenced
  broker, gone from Metadata, races with the move of its partitions; docs/profiles/failover.md), and the
  acks=all wait for the remaining follower, which starts fetching the moved partitions from their new
  leader right after the LeaderAndIsr. Both are also given
  minus the fencing time ("after fencing").
  Baseline: the configured session timeout. Kafka's failover after a hard kill is likewise bounded below by
  broker.session.timeout.ms (KRaft; in ZooKeeper mode by zookeeper.session.timeout.ms): nobody can tell a
  dead broker from a slow one sooner, so the ratio says what the whole failover costs on top of that floor.
  The after-fencing rows are divided by one ApiVersions round trip to a surviving broker (persistent
  connection, median of RTT_SAMPLES) measured in the same round.
- SIGTERM (also sent right after a heartbeat): the victim starts a controlled shutdown (a heartbeat with
  want_shut_down); the controller moves its leaderships away at once and tells it to stop once the brokers
  have them. Figures: until every partition it led has another leader and the brokers applied it, and
  until the process has exited (it closes its logs first). Baseline: the same ApiVersions round trip: the
  shutdown needs at least a few such exchanges (heartbeat, LeaderAndIsr to each replica, heartbeat), so the
  ratio reads as round trips spent.

settle() waits for everything the controller has sent when it is called, so it may also cover a metadata
push started right after the move (with SIGTERM: the one after the victim's last heartbeat). Quick mode runs
one round of each with 100 partitions (a 1,000-partition round takes ~30 s with SIGKILL, most of it set-up
and tear-down), with half the session timeout and heartbeat interval (4.5 s and 1 s, QUICK_SESSION_TIMEOUT_MS
in harness.py); full mode three rounds of each with 1,000. `extra` holds the per-round detail: partitions
changed and moved, LeaderAndIsr partition states sent, clean elections, and the warning and error lines of
the brokers' output.
"""

import asyncio
import re
import shutil
import signal
import socket
import statistics
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import confluent_kafka

from replog.controller.propagation import PropagationError
from replog.controller.registry import NO_LEADER, PartitionRegistration
from replog.harness.local_cluster import LocalCluster
from replog.harness.probes import exchange_api_versions

from .harness import KAFKA_REPLICATION_DEFAULTS, Result, Stats, heartbeat_overrides, session_timeout_ms

NAME = "failover"
TOPIC = "failover"
VICTIM = 1
POLL_INTERVAL_S = 0.005
FAILOVER_TIMEOUT_S = 60.0
PRODUCE_TIMEOUT_S = 60.0
RTT_SAMPLES = 200
HEARTBEAT_WAIT_S = 30.0
LOG_SAMPLES = 5  # distinct warning/error messages kept per round

Partition = tuple[str, int]  # (topic, partition)


@dataclass
class Round:
    """One failover, times in seconds from the signal."""

    signal: str
    noticed_s: float  # SIGKILL: the controller fenced the victim; SIGTERM: it began its controlled shutdown
    elected_s: float  # every partition the victim led has another leader on the controller
    applied_s: float  # ... and settle() returned: the brokers answered every request sent so far
    produced_s: float | None  # SIGKILL: the last acks=all delivery report, one record per moved partition
    exited_s: float | None  # SIGTERM: the victim's process has exited
    rtt_us: float  # median ApiVersions round trip to a surviving broker, before the signal
    moved: int
    since_heartbeat_ms: float  # from the victim's last heartbeat reaching the controller to the signal
    max_heartbeat_gap_ms: dict  # per broker, between heartbeats reaching the controller before the signal
    counts: dict = field(default_factory=dict)
    broker_logs: dict = field(default_factory=dict)


# ------------------------------------------------------------------------------------------- pure helpers


def changed_partitions(
    before: dict[Partition, PartitionRegistration],
    after: dict[Partition, PartitionRegistration],
    victim: int,
    *,
    victim_reachable: bool,
) -> dict:
    """What the failover changed, from the controller's registrations before and after: partitions whose
    partition epoch moved, leaderships moved, elections that were not clean (new leader outside the old ISR
    or the leader epoch not exactly one more), and the partition states the LeaderAndIsr requests carried
    (each changed partition goes to each of its replicas the controller still talks to)."""
    changed = [p for p in after if after[p].partition_epoch != before[p].partition_epoch]
    moved = [p for p in after if before[p].leader == victim and after[p].leader != victim]
    unclean = [
        p
        for p in moved
        if after[p].leader not in before[p].isr or after[p].leader_epoch != before[p].leader_epoch + 1
    ]
    states = sum(sum(1 for r in after[p].replicas if victim_reachable or r != victim) for p in changed)
    new_leaders = Counter(after[p].leader for p in moved)
    return {
        "changed": len(changed),
        "moved": len(moved),
        "unclean_or_skipped_epoch": len(unclean),
        "leader_and_isr_partition_states": states,
        "new_leaders": {str(b): n for b, n in sorted(new_leaders.items())},
        "still_victim_in_isr": sum(1 for p in after if victim in after[p].isr),
    }


LOG_LINE = re.compile(r"^\S+ \S+ (WARNING|ERROR|CRITICAL) (\S+): (.*)$")


def log_problems(text: str, samples: int = LOG_SAMPLES) -> dict:
    """Warning and error lines of a broker's output (the format run_broker configures), tracebacks, and the
    first few distinct messages with their digits blanked, so repeats of one message count once."""
    counts: Counter[str] = Counter()
    distinct: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("Traceback"):
            counts["Traceback"] += 1
        match = LOG_LINE.match(line)
        if match is None:
            continue
        level, logger, message = match.groups()
        counts[level] += 1
        key = f"{level} {logger}: {re.sub(r'[0-9]+', 'N', message)}"
        if key not in distinct and len(distinct) < samples:
            distinct[key] = f"{level} {logger}: {message}"[:300]
    return {"counts": dict(counts), "first": list(distinct.values())}


def max_gap(times: list[float]) -> float:
    """The longest interval between consecutive times (0 for fewer than two)."""
    return max((b - a for a, b in zip(times, times[1:], strict=False)), default=0.0)


def median_of(values: Iterable[float]) -> float:
    return statistics.median(list(values))


# --------------------------------------------------------------------------------------------- measuring


def api_versions_round_trips(port: int, count: int) -> list[float]:
    """Microseconds of `count` ApiVersions v0 exchanges with a broker over one connection."""
    times = []
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for correlation_id in range(count):
            started = time.perf_counter()
            body = exchange_api_versions(sock, correlation_id, "replog-bench")
            times.append((time.perf_counter() - started) * 1e6)
            assert int.from_bytes(body[:4], "big") == correlation_id
    return times


class _Silent:
    """A logger for librdkafka: connection-refused reports about the killed broker are expected noise."""

    def log(self, *args, **kwargs) -> None:
        pass


def connected_producer(bootstrap: str, partitions: list[Partition]) -> confluent_kafka.Producer:
    """acks=all, and already connected to every broker with the topic's metadata: one record to each
    partition, acknowledged."""
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": False,  # one record per partition; no producer id to renegotiate
        "linger.ms": 0,
        "message.timeout.ms": int(PRODUCE_TIMEOUT_S * 1000),
    }, logger=_Silent())  # fmt: skip
    for topic, partition in partitions:
        producer.produce(topic, b"before", partition=partition)
    if remaining := producer.flush(PRODUCE_TIMEOUT_S):
        raise RuntimeError(f"confluent-kafka: {remaining} warm-up records not acknowledged")
    return producer


def produce_one_each(producer: confluent_kafka.Producer, partitions: list[Partition]) -> float:
    """Hand one record to each partition now; returns the perf_counter() of the last delivery report."""
    delivered: dict[Partition, float] = {}
    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(f"{msg.topic()}-{msg.partition()}: {err}")
        else:
            delivered[(msg.topic(), msg.partition())] = time.perf_counter()

    for topic, partition in partitions:
        producer.produce(topic, b"after", partition=partition, on_delivery=on_delivery)
    remaining = producer.flush(PRODUCE_TIMEOUT_S)
    if remaining or errors:
        raise RuntimeError(f"confluent-kafka: {remaining} records undelivered, errors {errors[:5]}")
    return max(delivered.values())


class HeartbeatLog:
    """When each broker's heartbeats reach the controller: its public broker_heartbeat, wrapped on this
    instance (the request handler looks it up there)."""

    def __init__(self, controller) -> None:
        self.arrivals: dict[int, list[float]] = {}
        original = controller.broker_heartbeat

        def recording(broker_id: int, *args, **kwargs):
            self.arrivals.setdefault(broker_id, []).append(time.perf_counter())
            return original(broker_id, *args, **kwargs)

        controller.broker_heartbeat = recording

    async def next_from(self, broker_id: int, timeout: float) -> float:
        """Wait for the broker's next heartbeat; returns when it arrived."""
        seen = len(self.arrivals.get(broker_id, []))
        deadline = time.perf_counter() + timeout
        while len(self.arrivals.get(broker_id, [])) == seen:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"no heartbeat from broker {broker_id} in {timeout} s")
            await asyncio.sleep(POLL_INTERVAL_S / 5)  # the time the signal follows it by is reported
        return self.arrivals[broker_id][-1]


@asynccontextmanager
async def cluster_at(root: Path, logs: dict, session_timeout: int) -> AsyncIterator[LocalCluster]:
    """A 3-broker cluster with Kafka's defaults (the session timeout and heartbeats aside in quick mode); on
    the way out, the brokers' output is scanned into `logs` and the directory deleted."""
    cluster = LocalCluster(root, brokers=3, overrides=KAFKA_REPLICATION_DEFAULTS | heartbeat_overrides(session_timeout),
                           session_timeout_ms=session_timeout)
    try:
        await cluster.start()
        yield cluster
    finally:
        await cluster.stop()
        for node_id, broker in cluster.brokers.items():
            try:
                logs[str(node_id)] = log_problems(broker.output.read_text(errors="replace"))
            except OSError:
                pass
        shutil.rmtree(root, ignore_errors=True)


def registrations(
    cluster: LocalCluster, partitions: list[Partition]
) -> dict[Partition, PartitionRegistration]:
    return {tp: cluster.controller.registration(*tp) for tp in partitions}


async def settle_ignoring(cluster: LocalCluster, victim: int) -> None:
    """settle(), tolerating failed requests to the victim (it died, or left, with some in flight)."""
    try:
        await cluster.controller.settle()
    except PropagationError as e:
        if any(f.broker_id != victim for f in e.failures):
            raise


async def failover_round(root: Path, partitions: int, kill: bool, session_timeout: int) -> Round:
    logs: dict = {}
    tps = [(TOPIC, index) for index in range(partitions)]
    async with cluster_at(root, logs, session_timeout) as cluster:
        controller = cluster.controller
        heartbeats = HeartbeatLog(controller)
        await controller.create_topic(
            TOPIC, partitions=partitions, replication_factor=3, configs={"min.insync.replicas": "2"}
        )
        await controller.settle()
        before = registrations(cluster, tps)
        if cluster.active_brokers() != set(cluster.brokers) or any(
            r.partition_epoch for r in before.values()
        ):
            raise RuntimeError(
                "a broker was fenced while the topics were created (its event loop was blocked "
                "longer than the session timeout): the round would not start from a clean state"
            )
        led = [tp for tp, r in before.items() if r.leader == VICTIM]
        survivor = cluster.brokers[next(b for b in cluster.brokers if b != VICTIM)]
        # Blocking clients run in threads: the controller in this loop must keep answering the brokers.
        rtt_us = median_of(await asyncio.to_thread(api_versions_round_trips, survivor.port, RTT_SAMPLES))
        producer = await asyncio.to_thread(connected_producer, cluster.bootstrap, tps) if kill else None
        proc = cluster.brokers[VICTIM].proc
        # Right after a heartbeat, so that a killed victim is detected a whole session timeout later.
        last_heartbeat = await heartbeats.next_from(VICTIM, HEARTBEAT_WAIT_S)
        gaps = {str(b): round(max_gap(times) * 1000, 1) for b, times in sorted(heartbeats.arrivals.items())}

        started = time.perf_counter()
        proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        produced = asyncio.create_task(asyncio.to_thread(produce_one_each, producer, led)) if kill else None
        exited = None if kill else asyncio.create_task(wait_exit(proc))
        noticed = elected = None
        deadline = started + FAILOVER_TIMEOUT_S
        while elected is None:
            now = time.perf_counter()
            state = controller.metadata.brokers[VICTIM]
            if noticed is None and (state.fenced or state.in_controlled_shutdown):
                noticed = now
            if all(controller.registration(*tp).leader not in (VICTIM, NO_LEADER) for tp in led):
                elected = now
                noticed = noticed or now  # both in one poll: the change and the fencing are one step
            elif now > deadline:
                raise TimeoutError(
                    f"broker {VICTIM}'s partitions have no other leader {FAILOVER_TIMEOUT_S} s "
                    f"after {'SIGKILL' if kill else 'SIGTERM'}"
                )
            else:
                await asyncio.sleep(POLL_INTERVAL_S)
        await settle_ignoring(cluster, VICTIM)
        applied = time.perf_counter()
        produced_at = await produced if produced is not None else None
        exited_at = await exited if exited is not None else None
        await settle_ignoring(cluster, VICTIM)
        counts = changed_partitions(before, registrations(cluster, tps), VICTIM, victim_reachable=not kill)
    return Round(
        "SIGKILL" if kill else "SIGTERM",
        noticed - started,
        elected - started,
        applied - started,
        None if produced_at is None else produced_at - started,
        None if exited_at is None else exited_at - started,
        rtt_us,
        len(led),
        (started - last_heartbeat) * 1000,
        gaps,
        counts,
        logs,
    )


async def wait_exit(proc) -> float:
    deadline = time.perf_counter() + FAILOVER_TIMEOUT_S
    while proc.poll() is None:
        if time.perf_counter() > deadline:
            raise TimeoutError("the broker did not exit after SIGTERM")
        await asyncio.sleep(POLL_INTERVAL_S)
    return time.perf_counter()


def run(quick: bool, workdir: Path) -> list[Result]:
    partitions, rounds = (100, 1) if quick else (1000, 3)
    session_timeout = session_timeout_ms(quick)
    kills = [asyncio.run(failover_round(workdir / f"failover-kill-{n}", partitions, True, session_timeout))
             for n in range(rounds)]  # fmt: skip
    terms = [asyncio.run(failover_round(workdir / f"failover-term-{n}", partitions, False, session_timeout))
             for n in range(rounds)]  # fmt: skip

    def us(rounds_: list[Round], figure) -> Stats:
        return Stats.of([figure(r) * 1e6 for r in rounds_])

    timeout_us = session_timeout * 1000
    kill_rtt = median_of(r.rtt_us for r in kills)
    term_rtt = median_of(r.rtt_us for r in terms)
    common = {
        "partitions": partitions,
        "replication_factor": 3,
        "min_insync_replicas": 2,
        "poll_interval_ms": POLL_INTERVAL_S * 1000,
        "session_timeout_ms": session_timeout,
    }
    kill_summary = common | {
        "fenced_ms": [round(r.noticed_s * 1000, 1) for r in kills],
        "applied_ms": [round(r.applied_s * 1000, 1) for r in kills],
        "produced_ms": [round(r.produced_s * 1000, 1) for r in kills],
        "moved": [r.moved for r in kills],
        "kill_after_heartbeat_ms": [round(r.since_heartbeat_ms, 1) for r in kills],
        "max_heartbeat_gap_ms": [r.max_heartbeat_gap_ms for r in kills],
    }
    term_summary = common | {
        "controlled_shutdown_seen_ms": [round(r.noticed_s * 1000, 1) for r in terms],
        "applied_ms": [round(r.applied_s * 1000, 1) for r in terms],
        "exited_ms": [round(r.exited_s * 1000, 1) for r in terms],
        "moved": [r.moved for r in terms],
        "sigterm_after_heartbeat_ms": [round(r.since_heartbeat_ms, 1) for r in terms],
        "max_heartbeat_gap_ms": [r.max_heartbeat_gap_ms for r in terms],
    }
    kill_extra = kill_summary | {"rounds": [asdict(r) for r in kills]}
    term_extra = term_summary | {"rounds": [asdict(r) for r in terms]}
    # The case names stay the same from run to run (`replog bench compare` matches them); how many
    # leaderships moved is in `extra`.
    return [
        Result(
            NAME,
            f"SIGKILL, {partitions:,} partitions: moved + applied",
            "us",
            us(kills, lambda r: r.applied_s),
            "session timeout",
            timeout_us,
            kill_extra,
        ),
        Result(
            NAME,
            "SIGKILL: acks=all produce to each",
            "us",
            us(kills, lambda r: r.produced_s),
            "session timeout",
            timeout_us,
            kill_summary,
        ),
        Result(
            NAME,
            "SIGKILL: moved + applied after fencing",
            "us",
            us(kills, lambda r: r.applied_s - r.noticed_s),
            "ApiVersions RTT",
            kill_rtt,
            kill_summary,
        ),
        Result(
            NAME,
            "SIGKILL: produce after fencing",
            "us",
            us(kills, lambda r: r.produced_s - r.noticed_s),
            "ApiVersions RTT",
            kill_rtt,
            kill_summary,
        ),
        Result(
            NAME,
            "SIGTERM: moved + applied",
            "us",
            us(terms, lambda r: r.applied_s),
            "ApiVersions RTT",
            term_rtt,
            term_extra,
        ),
        Result(
            NAME,
            "SIGTERM: process exited",
            "us",
            us(terms, lambda r: r.exited_s),
            "ApiVersions RTT",
            term_rtt,
            term_summary,
        ),
    ]
