"""`python -m replog.demo` (make demo): failover on a real cluster of three controllers and three brokers, told
step by step.

`replog cluster up` (replog/cluster_control.py) starts three controllers (the metadata quorum) and three brokers
in a temporary directory. Topic `demo` gets 3 partitions, RF=3 and min.insync.replicas=2; 5,000 records go in
with the bundled idempotent producer (acks=all) and come back out. Then the active controller is SIGKILLed and
another one takes over (its id, epoch and how long it took are shown). Then the leader of partition 0 is
SIGKILLed: the new active controller fences it and moves its leaderships, 5,000 more records go in with two replicas in sync, the
broker is started again and catches up until every ISR is whole, and all 10,000 records must be there
exactly once; the killed controller comes back as a follower. A short RF=3 acks=all throughput run ends it. The cluster is always brought down, whatever
fails; the exit code is 1 if any check failed.
"""

import asyncio
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from . import cli, cluster_control
from .client import Admin, Consumer, KafkaError, NewTopic, PartitionDescription, Producer
from .client.quorum_admin import QuorumInfo
from .cluster_nodes.manifest import CLUSTER_FILE, ClusterError, ClusterManifest
from .cluster_nodes.nodes import active_controller
from .harness.processes import HOST

CONTROLLERS = 3
BROKERS = 3
TOPIC = "demo"
PARTITIONS = 3
REPLICATION_FACTOR = 3
RECORDS_PER_ROUND = 5_000
VALUE_BYTES = 100
BENCH_TOPIC = "bench"
BENCH_RECORD_BYTES = 1024
BENCH_RECORDS = 50 * 1024  # 50 MiB of values
BENCH_BATCH_BYTES = 1_000_000  # as in benchmarks/produce_throughput.py: under message.max.bytes
FAILOVER_TIMEOUT_S = 30.0
ISR_TIMEOUT_S = 30.0
CONSUME_TIMEOUT_S = 60.0
METADATA_POLL_INTERVAL_S = 0.1


@dataclass(frozen=True, slots=True)
class Setting:
    scope: str  # "controller", "broker" or "topic"
    key: str
    value: str
    kafka_default: str
    why: str


# Everything the demo sets differently from Kafka, so a minute is enough to watch a failover and a recovery.
SETTINGS = (
    Setting("controller", "broker.session.timeout.ms", "3000", "9000",
            "a silent broker is fenced, and its leaderships move, after 3 s"),
    Setting("broker", "broker.heartbeat.interval.ms", "500", "2000",
            "heartbeats stay well inside the shorter session"),
    Setting("broker", "replica.lag.time.max.ms", "2000", "30000",
            "a follower that stops fetching leaves the ISR, and a restarted one rejoins, within seconds"),
    Setting("broker", "replica.fetch.backoff.ms", "100", "1000",
            "a follower retries soon after its leader dies, and finds the new one"),
    Setting("topic", "min.insync.replicas", "2", "1",
            "acks=all needs two copies: one broker may die without losing an acknowledged record"),
)  # fmt: skip


def settings_for(scope: str) -> dict[str, str]:
    return {s.key: s.value for s in SETTINGS if s.scope == scope}


class Checks:
    """The demo's verifications, printed as they are made; any failure makes the exit code 1."""

    def __init__(self) -> None:
        self.passed = 0
        self.failed: list[str] = []

    def check(self, ok: bool, what: str) -> None:
        print(f"check: {what}: {'OK' if ok else 'FAILED'}")
        if ok:
            self.passed += 1
        else:
            self.failed.append(what)


def step(title: str) -> None:
    print(f"\n== {title}")


def _value(i: int) -> bytes:
    return (b"record-%06d-" % i).ljust(VALUE_BYTES, b"x")


def _unacknowledged(deliveries: Iterable[asyncio.Future]) -> int:
    return sum(1 for d in deliveries if not d.done() or d.cancelled() or d.exception() is not None)


async def produce(bootstrap: str, numbers: range) -> tuple[float, int]:
    """Send the records with these numbers, keyed, acks=all; returns (seconds, records not acknowledged)."""
    started = time.perf_counter()
    async with Producer(bootstrap, acks="all", linger_ms=5) as producer:
        deliveries = [await producer.send(TOPIC, _value(i), key=b"key-%d" % i) for i in numbers]
        await producer.flush()
    return time.perf_counter() - started, _unacknowledged(deliveries)


async def consume_all(bootstrap: str) -> list[bytes]:
    """Every record value of the topic, from offset 0 up to the end offsets found first."""
    values: list[bytes] = []
    async with Consumer(bootstrap) as consumer:
        tps = [(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        positions = dict.fromkeys(tps, 0)
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while any(positions[tp] < ends[tp] for tp in tps) and time.monotonic() < deadline:
            for tp, records in (await consumer.getmany(1000)).items():
                assert all(a.offset < b.offset for a, b in zip(records, records[1:], strict=False))
                values.extend(r.value for r in records)
                positions[tp] = records[-1].offset + 1
    return values


def check_exactly_once(checks: Checks, values: list[bytes], count: int) -> None:
    found = Counter(values)
    expected = {_value(i) for i in range(count)}
    missing = len(expected - found.keys())
    duplicated = sum(n - 1 for n in found.values())
    unexpected = len(found.keys() - expected)
    print(
        f"read {len(values):,} records: {missing} missing, {duplicated} duplicated, {unexpected} unexpected"
    )
    checks.check(
        missing == duplicated == unexpected == 0, f"records 0..{count - 1} each present exactly once"
    )


async def wait_for_partitions(
    bootstrap: str, condition: Callable[[tuple[PartitionDescription, ...]], bool], timeout: float, what: str
) -> tuple[PartitionDescription, ...]:
    """Poll the topic's metadata until condition holds; raises TimeoutError naming `what`."""
    deadline = time.monotonic() + timeout
    async with Admin(bootstrap, request_timeout_ms=2000) as admin:
        while True:
            try:
                partitions = (await admin.describe_topics([TOPIC]))[TOPIC].partitions
                if condition(partitions):
                    return partitions
            except KafkaError:
                pass  # the broker we asked just died, or the metadata is not there yet: ask again
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {what} within {timeout:g}s")
            await asyncio.sleep(METADATA_POLL_INTERVAL_S)


def all_in_sync(partitions: tuple[PartitionDescription, ...]) -> bool:
    return all(p.leader >= 0 and len(p.isr) == REPLICATION_FACTOR for p in partitions)


async def show_describe(bootstrap: str, *flags: str) -> None:
    argv = ["topics", "describe", "--bootstrap-server", bootstrap, "--topic", TOPIC, *flags]
    print("$ replog " + " ".join(argv))
    await asyncio.to_thread(cli.main, argv)  # the real command; it runs its own event loop


async def benchmark(bootstrap: str, checks: Checks) -> None:
    async with Admin(bootstrap) as admin:
        await admin.create_topics(
            [NewTopic(BENCH_TOPIC, PARTITIONS, REPLICATION_FACTOR, settings_for("topic"))]
        )
    value = b"x" * BENCH_RECORD_BYTES
    async with Producer(bootstrap, acks="all", linger_ms=5, batch_size=BENCH_BATCH_BYTES) as producer:
        await producer.start()  # connections, producer id and metadata outside the timed region
        await producer.cluster.partitions_for(BENCH_TOPIC)
        started = time.perf_counter()
        deliveries = [await producer.send(BENCH_TOPIC, value) for _ in range(BENCH_RECORDS)]
        await producer.flush()
        seconds = time.perf_counter() - started
    megabytes = BENCH_RECORDS * BENCH_RECORD_BYTES / 1e6
    print(f"{megabytes:.1f} MB in {seconds:.2f}s: {megabytes / seconds:.1f} MB/s, "
          f"{BENCH_RECORDS / seconds:,.0f} records/s")  # fmt: skip
    checks.check(_unacknowledged(deliveries) == 0, f"all {BENCH_RECORDS:,} benchmark records acknowledged")


async def wait_for_new_active_controller(manifest: ClusterManifest, old_leader: int, old_epoch: int) -> tuple[int, int]:
    """Poll the surviving controllers (DescribeQuorum) until one leads a later epoch: (its id, the epoch)."""
    survivors = [(HOST, c.port) for c in manifest.controllers if c.id != old_leader]
    deadline = time.monotonic() + FAILOVER_TIMEOUT_S
    while True:
        quorum = await active_controller(survivors)
        if quorum is not None and quorum.leader_epoch > old_epoch:
            return quorum.leader_id, quorum.leader_epoch
        if time.monotonic() > deadline:
            raise TimeoutError(f"no new active controller within {FAILOVER_TIMEOUT_S:g}s")
        await asyncio.sleep(METADATA_POLL_INTERVAL_S)


async def wait_until_caught_up(manifest: ClusterManifest, controller_id: int) -> QuorumInfo:
    """Poll DescribeQuorum until the controller's log reaches the leader's end (lag 0)."""
    deadline = time.monotonic() + ISR_TIMEOUT_S
    while True:
        quorum = await active_controller([(HOST, c.port) for c in manifest.controllers])
        if quorum is not None and any(v.replica_id == controller_id and quorum.lag(v) == 0 for v in quorum.voters):
            return quorum
        if time.monotonic() > deadline:
            raise TimeoutError(f"controller {controller_id} did not catch up within {ISR_TIMEOUT_S:g}s")
        await asyncio.sleep(METADATA_POLL_INTERVAL_S)


async def fail_over_the_controller(root: Path, manifest: ClusterManifest, checks: Checks) -> int:
    """SIGKILL the active controller and watch another take over; returns the killed one's id."""
    quorum = await active_controller([(HOST, c.port) for c in manifest.controllers])
    if quorum is None:
        raise TimeoutError("no active controller to kill")
    old = quorum.leader_id
    step(f"SIGKILL the active controller {old} (replog cluster kill-node {old}), leader of the metadata quorum "
         f"in epoch {quorum.leader_epoch}")
    killed_at = time.monotonic()
    print(f"controller {old}: {await asyncio.to_thread(cluster_control.kill_node, root, old)}")
    new, epoch = await wait_for_new_active_controller(manifest, old, quorum.leader_epoch)
    print(f"controller {new} is active in epoch {epoch}, {time.monotonic() - killed_at:.1f}s after the kill")
    checks.check(new != old and epoch > quorum.leader_epoch, "another controller took over in a later epoch")
    survivor = next(c for c in manifest.controllers if c.id == new)
    argv = ["metadata-quorum", "--bootstrap-controller", f"{HOST}:{survivor.port}", "describe", "--status"]
    print("$ replog " + " ".join(argv))
    await asyncio.to_thread(cli.main, argv)
    return old


async def tell_story(root: Path, manifest: ClusterManifest, checks: Checks) -> None:
    bootstrap = manifest.bootstrap
    n = RECORDS_PER_ROUND
    step(f"create topic {TOPIC}: {PARTITIONS} partitions, replication factor {REPLICATION_FACTOR}, "
         f"min.insync.replicas={settings_for('topic')['min.insync.replicas']}")  # fmt: skip
    async with Admin(bootstrap) as admin:
        await admin.create_topics([NewTopic(TOPIC, PARTITIONS, REPLICATION_FACTOR, settings_for("topic"))])
    await wait_for_partitions(
        bootstrap, all_in_sync, ISR_TIMEOUT_S, "leaders with full ISRs for the new topic"
    )
    await show_describe(bootstrap)

    step(f"produce records 0..{n - 1} (bundled idempotent producer, acks=all), then read them back")
    seconds, unacknowledged = await produce(bootstrap, range(n))
    print(f"produced {n:,} records in {seconds:.2f}s")
    checks.check(unacknowledged == 0, f"all {n:,} records acknowledged")
    check_exactly_once(checks, await consume_all(bootstrap), n)

    killed_controller = await fail_over_the_controller(root, manifest, checks)

    before = (await wait_for_partitions(bootstrap, all_in_sync, ISR_TIMEOUT_S, "full ISRs"))[0]
    step(f"SIGKILL broker {before.leader}, the leader of partition 0 (replog cluster kill-node {before.leader}): "
         f"the new active controller moves its leaderships")
    killed_at = time.monotonic()
    print(
        f"broker {before.leader}: {await asyncio.to_thread(cluster_control.kill_node, root, before.leader)}"
    )
    after = (
        await wait_for_partitions(
            bootstrap,
            lambda ps: ps[0].leader not in (-1, before.leader) and before.leader not in ps[0].isr,
            FAILOVER_TIMEOUT_S,
            f"new leader for partition 0 with broker {before.leader} out of its ISR",
        )
    )[0]
    print(f"partition 0 is led by broker {after.leader} with ISR {list(after.isr)}, "
          f"{time.monotonic() - killed_at:.1f}s after the kill")  # fmt: skip
    checks.check(after.leader in before.isr, "the new leader of partition 0 was in sync (a clean election)")
    await show_describe(bootstrap)
    await show_describe(bootstrap, "--under-replicated-partitions")

    step(f"produce records {n}..{2 * n - 1} (acks=all) with broker {before.leader} down")
    seconds, unacknowledged = await produce(bootstrap, range(n, 2 * n))
    print(f"produced {n:,} records in {seconds:.2f}s")
    checks.check(unacknowledged == 0, f"all {n:,} acknowledged with 2 of 3 replicas in sync")

    step(f"start broker {before.leader} again (replog cluster start-node {before.leader})")
    started_at = time.monotonic()
    node = await asyncio.to_thread(cluster_control.start_node, root, before.leader)
    print(f"broker {node.id} serves again (pid {node.pid}) on port {node.port}, with its old data")
    await wait_for_partitions(
        bootstrap, all_in_sync, ISR_TIMEOUT_S, f"ISRs with all {REPLICATION_FACTOR} replicas"
    )
    print(f"every ISR holds all {REPLICATION_FACTOR} replicas again, "
          f"{time.monotonic() - started_at:.1f}s after the restart")  # fmt: skip
    await show_describe(bootstrap)

    step(f"start controller {killed_controller} again (replog cluster start-node {killed_controller})")
    await asyncio.to_thread(cluster_control.start_node, root, killed_controller)
    quorum = await wait_until_caught_up(manifest, killed_controller)
    print(f"controller {killed_controller} has caught up with the metadata log (offset {quorum.high_watermark}) as a "
          f"follower of controller {quorum.leader_id} in epoch {quorum.leader_epoch}")
    checks.check(quorum.leader_id != killed_controller, f"controller {killed_controller} rejoined as a follower")

    step("read the whole topic from the beginning")
    check_exactly_once(checks, await consume_all(bootstrap), 2 * n)

    step(f"benchmark: {BENCH_RECORDS:,} records of {BENCH_RECORD_BYTES} B to topic {BENCH_TOPIC} "
         f"(RF=3, acks=all, bundled producer, {BENCH_BATCH_BYTES:,} B batches, linger 5 ms)")  # fmt: skip
    await benchmark(bootstrap, checks)


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)  # unwinds through the finally that brings the cluster down


def main() -> int:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    started = time.monotonic()
    print("settings that differ from Kafka's defaults, and why:")
    for s in SETTINGS:
        print(f"  {s.scope} {s.key}={s.value} (Kafka: {s.kafka_default}): {s.why}")
    checks = Checks()
    root = Path(tempfile.mkdtemp(prefix="replog-demo-"))
    try:
        flags = [f"--controller-override {k}={v}" for k, v in settings_for("controller").items()]
        flags += [f"--override {k}={v}" for k, v in settings_for("broker").items()]
        step(f"replog cluster up --controllers {CONTROLLERS} --brokers {BROKERS} --data-dir {root} {' '.join(flags)}")
        manifest = cluster_control.cluster_up(
            root,
            BROKERS,
            controllers=CONTROLLERS,
            broker_overrides=settings_for("broker"),
            controller_overrides=settings_for("controller"),
        )
        print(f"bootstrap {manifest.bootstrap}\n{cluster_control.format_nodes(manifest)}")
        asyncio.run(tell_story(root, manifest, checks))
    except (ClusterError, KafkaError, TimeoutError) as e:
        checks.check(False, f"the story runs to its end ({type(e).__name__}: {e})")
    finally:
        if (root / CLUSTER_FILE).exists():
            step("replog cluster down")
            print(cluster_control.format_outcomes(cluster_control.cluster_down(root)))
    if checks.failed:
        print(f"\ndemo FAILED: {len(checks.failed)} of {checks.passed + len(checks.failed)} checks failed; "
              f"logs and data kept in {root}")  # fmt: skip
        return 1
    shutil.rmtree(root)
    print(f"\ndemo passed: {checks.passed} checks in {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
