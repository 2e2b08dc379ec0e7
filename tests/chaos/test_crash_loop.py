"""The crash loop against a real local cluster: SIGKILL during heavy writes, torn unflushed data, and the
independent verifier after every restart and at the end. The short run is part of every test run; the long
one (hundreds of restarts) is marked slow. Below them, the regressions for the bugs the loop found."""

import asyncio
import types

import pytest

from replog import cli
from replog.broker.access import Access
from replog.broker.handlers import metadata as metadata_handler
from replog.broker.handlers.context import TopicAdmin, TopicDefaults
from replog.broker.metadata import MetadataImage, PartitionMetadata, TopicMetadata
from replog.chaos import crash_loop
from replog.chaos.checker import ANOMALY_CLASSES
from replog.chaos.crash_loop_report import CrashLoopReport
from replog.chaos.log_verifier import RECOVERY_POINT_CHECKPOINT, read_offset_checkpoint, verify_partition
from replog.chaos.torn_writes import DAMAGE_KINDS
from replog.harness.broker_process import BrokerProcess
from replog.log.config import LogConfig
from replog.log.log_manager import LogManager
from replog.log.partition_log import PartitionLog
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_response, encode_request
from replog.protocol.records import build_batch
from replog.security.authorizer import NO_AUTHORIZER, Authorizer
from replog.server.dispatch import is_awaitable
from tests.conditions import wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")

# Seed 2's 10 rounds (every one torn, so each kind of damage twice) kill leaders and kill brokers again
# before they caught up; the test checks that they still do.
SHORT_SEED = 2
SHORT_RESTARTS = 10
LONG_SEED = 300
LONG_RESTARTS = 300


def assert_clean(report: CrashLoopReport) -> None:
    print(report.format())  # shown by pytest when the test fails: every round and every count
    assert report.check.counts == dict.fromkeys(ANOMALY_CLASSES, 0)
    assert report.verifier_problems == []
    assert report.corrupt_served == []
    assert report.replica_divergence == []
    assert report.ok, report.problems
    assert report.acknowledged > 0
    assert len(report.restarts) == report.planned_restarts


@pytest.mark.timeout(240)
async def test_a_short_crash_loop_with_torn_writes_recovers_every_time(tmp_path):
    report = await crash_loop.run_crash_loop(tmp_path, restarts=SHORT_RESTARTS, seed=SHORT_SEED, torn_fraction=1.0)
    assert_clean(report)
    assert set(report.damage_counts) == set(DAMAGE_KINDS)
    assert any(r.why.startswith("again") for r in report.restarts)
    assert any(r.why.startswith("leader") for r in report.restarts)


@pytest.mark.slow
@pytest.mark.timeout(5400)  # 49 min measured on 2 loaded cores
async def test_hundreds_of_restarts_recover_every_time(tmp_path):
    report = await crash_loop.run_crash_loop(tmp_path, restarts=LONG_RESTARTS, seed=LONG_SEED, torn_fraction=0.5)
    assert_clean(report)
    assert set(report.damage_counts) == set(DAMAGE_KINDS)


def test_bad_arguments_are_a_usage_error_before_anything_starts(capsys):
    assert cli.main(["crash-loop", "--restarts", "0"]) == cli.EXIT_USAGE
    assert "--restarts must be >= 1" in capsys.readouterr().err


# ------------------------------------------------------------------------- regressions for found bugs


def test_a_torn_recovery_point_checkpoint_resets_to_full_recovery_instead_of_failing_the_start(tmp_path):
    """Found by the crash loop's checkpoint damage (seed 1): the broker refused to start. Kafka's
    LogManager.loadLogs resets an unreadable recovery-point checkpoint to 0, so every log recovers fully:
    here that must also truncate a torn batch that a trusted recovery point would have skipped."""
    config = LogConfig(segment_bytes=600, index_interval_bytes=100, segment_index_bytes=4096)
    manager = LogManager([tmp_path], config, clock_ms=lambda: 0)
    log = manager.get_or_create_log("t", 0, config)
    for i in range(20):
        log.append_as_leader(memoryview(bytearray(build_batch([(None, b"v%d" % i, [], 1000 + i)]))), leader_epoch=0)
    log.flush()
    manager.checkpoint_recovery_points()  # every offset flushed: a crash would skip recovery entirely
    end = log.log_end_offset
    active = log.active_segment.log_path
    manager.shutdown()
    (tmp_path / ".kafka_cleanshutdown").unlink()  # then a crash, which tore the last write and the checkpoint
    active.write_bytes(active.read_bytes()[:-3])
    checkpoint = tmp_path / RECOVERY_POINT_CHECKPOINT
    checkpoint.write_bytes(checkpoint.read_bytes()[:-4])

    reopened = LogManager([tmp_path], config, clock_ms=lambda: 0).get_log("t", 0)

    assert reopened.log_end_offset == end - 1
    assert reopened.recovery_point == 0
    assert verify_partition(tmp_path / "t-0").problems == []


class _Context(types.SimpleNamespace):
    pass


def _metadata_request(topic: str) -> _Context:
    body = encode_request(ApiKey.METADATA, 12, {"topics": [{"name": topic, "topic_id": None}],
                                                 "allow_auto_topic_creation": False,
                                                 "include_topic_authorized_operations": False})
    return _Context(api_version=12, frame=body, body_offset=0)


def _not_in_this_test(*args, **kwargs):
    raise AssertionError("Metadata must not create, delete or forward topics here")


async def test_a_restarted_broker_answers_metadata_only_once_it_has_the_controllers_metadata():
    """Found by the crash loop (seed 2): a restarted broker answered Metadata before the controller's first
    UpdateMetadata, saying the topic did not exist; librdkafka then failed 236 queued acks=all messages
    and refused new ones ("Unknown topic")."""
    image = MetadataImage("cluster", 0)
    topics = TopicAdmin(image, TopicDefaults(1, 1, LogConfig(), auto_create=False), _not_in_this_test,
                        _not_in_this_test, forward_to_controller=_not_in_this_test, has_metadata=asyncio.Event(),
                        access=Access(Authorizer(NO_AUTHORIZER)))
    answer = metadata_handler.handle(_metadata_request("crash"), topics)
    assert is_awaitable(answer), "answered at once, before the broker knew any topic"
    pending = asyncio.ensure_future(answer)
    for _ in range(10):  # an absence has nothing to wait on: hand the loop over a few times
        await asyncio.sleep(0)
    assert not pending.done()
    image.topics["crash"] = TopicMetadata("crash", None, {0: PartitionMetadata(1, 3, 0, [1], [1], [])})
    topics.has_metadata.set()
    response = decode_response(ApiKey.METADATA, 12, b"".join(await asyncio.wait_for(pending, 5)), 0)
    assert [(t.name, t.error_code) for t in response.topics] == [("crash", 0)]


FLUSHED_TOPIC = "flushed"


async def test_rolled_segments_are_flushed_so_that_a_crash_recovers_only_what_came_after(tmp_path):
    """Found by the crash loop (seed 300): recovery after each SIGKILL took longer and longer, because
    nothing ever flushed a log while the broker ran, so its recovery point stayed at 0 and every restart
    re-read and re-checked the whole log. Rolled segments must be flushed and the recovery point moved to
    the active segment (Kafka's UnifiedLog.roll), and the checkpoint must say so."""
    broker = BrokerProcess(tmp_path / "broker", overrides={"log.flush.offset.checkpoint.interval.ms": "200"})
    await asyncio.to_thread(broker.start)
    try:
        admin = confluent_admin.AdminClient({"bootstrap.servers": broker.bootstrap})
        created = admin.create_topics([confluent_admin.NewTopic(
            FLUSHED_TOPIC, 1, 1, config={"segment.bytes": "16384"})])
        created[FLUSHED_TOPIC].result(30)
        del admin
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                                             "batch.num.messages": 10})
        for _ in range(1000):  # 200 KB of values: a dozen segments of 16 KB
            producer.produce(FLUSHED_TOPIC, b"x" * 200, partition=0)
        assert producer.flush(30) == 0
        del producer  # closed before the broker stops, or it retries the connection
        partition_dir = broker.log_dir / f"{FLUSHED_TOPIC}-0"
        bases = sorted(int(p.stem) for p in partition_dir.glob("*.log"))
        assert len(bases) > 2

        def recovery_point() -> int:
            return read_offset_checkpoint(broker.log_dir / RECOVERY_POINT_CHECKPOINT, []).get(partition_dir.name, 0)

        await wait_until(lambda: recovery_point() == bases[-1], "the recovery point to reach the active segment")
    finally:
        await asyncio.to_thread(broker.stop)


def test_only_rolled_segments_are_flushed_and_the_recovery_point_stops_at_the_active_one(tmp_path):
    config = LogConfig(segment_bytes=600, index_interval_bytes=100, segment_index_bytes=4096)
    log = PartitionLog.open(tmp_path / "t-0", config, clock_ms=lambda: 0, clean_shutdown=True)
    assert log.prepare_flush_of_rolled_segments() is None  # one active segment, nothing rolled
    for i in range(20):
        log.append_as_leader(memoryview(bytearray(build_batch([(None, b"v%d" % i, [], 1000 + i)]))), leader_epoch=0)
    active = log.active_segment
    ticket = log.prepare_flush_of_rolled_segments()
    assert active.file not in ticket.files
    assert len(ticket.files) == 3 * (len(log.segments) - 1)
    ticket.fsync()
    assert log.complete_flush(ticket)
    assert log.recovery_point == active.base_offset < log.log_end_offset
    assert log.prepare_flush_of_rolled_segments() is None
    log.close()


def test_a_duplicate_is_explained_from_the_replica_that_holds_every_copy(tmp_path):
    """Found with seed 11 on a loaded machine (docs/fault-testing.md): the same value written at epoch 0 and,
    after librdkafka bumped the producer epoch, again at epoch 1 sequence 0. The report must say so."""
    replicas = {node: tmp_path / f"broker-{node}" for node in (1, 2)}
    (replicas[1] / "crash-2").mkdir(parents=True)  # broker 1 was behind: it holds neither copy
    batches = bytearray()
    for base_offset, epoch, sequence in ((4790, 0, 1636), (4895, 1, 0)):
        batch = bytearray(build_batch([(None, crash_loop.pad("all0-6546"), [], 1_000)], producer_id=7,
                                      producer_epoch=epoch, base_sequence=sequence))
        batch[0:8] = base_offset.to_bytes(8, "big")
        batches += batch
    (replicas[2] / "crash-2").mkdir(parents=True)
    (replicas[2] / "crash-2" / "00000000000000000000.log").write_bytes(batches)
    cluster = types.SimpleNamespace(brokers={node: types.SimpleNamespace(log_dir=d) for node, d in replicas.items()})
    report = CrashLoopReport(11, 1, 1.0)
    report.restarts.append(crash_loop.Restart(1, 3, "leader of partition 2", killed_at_ms=2_000))

    [origin] = crash_loop.explain_duplicates(cluster, tmp_path, report, {2: [(4790, "all0-6546"), (4895, "all0-6546")]})

    assert origin.startswith("(broker 2's replica) 'all0-6546' (produced before the kill of round #1): 2/4790: "
                             "producer 7 epoch 0 base sequence 1636")
    assert "2/4895: producer 7 epoch 1 base sequence 0" in origin
    assert origin.endswith("after a producer epoch bump (KIP-360): see the writer's EOS log")
    assert crash_loop.explain_duplicates(cluster, tmp_path, report, {2: [(4790, "all0-6546")]}) == []
