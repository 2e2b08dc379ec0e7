"""The broker's dump line built from what changed (replog/broker/metrics_dump.py): after every step of a
scenario it is byte for byte the line a full dump makes (the format of docs/metrics-dumps.md, built from every
partition as before issue 18), and an unchanged partition's line is neither rebuilt nor re-encoded."""

import json

import pytest
from kio.schema.errors import ErrorCode
from prometheus_client import CollectorRegistry, generate_latest

from replog.broker.fetch_params import FollowerFetch
from replog.broker.metrics import BrokerCollector, BrokerMetrics, TopicCounters
from replog.broker.metrics_dump import BrokerDump, partition_line
from replog.broker.replica_manager import ReplicaManager
from replog.log.config import LogConfig
from replog.log.file_budget import MIN_OPEN_FILES, FileBudget
from replog.log.log_manager import LogManager
from replog.log.partition_log import TopicPartition
from replog.metrics.dump_writer import encode_line
from replog.protocol.control import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
)
from replog.protocol.records import build_batch
from tests.unit.test_broker_metrics import (  # noqa: F401 (clock, proposals: fixtures)
    CONFIG,
    LAG_MS,
    LOCAL,
    SECOND,
    THIRD,
    TOPIC_ID,
    Clock,
    clock,
    proposals,
    replica_manager,
)


@pytest.fixture
def manager(tmp_path, clock, proposals):
    return replica_manager(tmp_path, clock, proposals, BrokerMetrics(LOCAL))


@pytest.fixture
def dump(manager):
    return BrokerDump(manager.metrics, manager)


def full_dump_line(manager: ReplicaManager, now_ms: int) -> bytes:
    """The line as the dump made it before it followed changes: every partition built and encoded."""
    metrics = manager.metrics
    gauges = metrics.replication_gauges(manager.partitions)
    totals = TopicCounters.total(metrics.topics.values())
    broker = {
        "bytes_in_total": totals.bytes_in, "messages_in_total": totals.messages_in,
        "bytes_out_total": totals.bytes_out, "replication_bytes_in_total": totals.replication_bytes_in,
        "replication_bytes_out_total": totals.replication_bytes_out,
        "isr_shrinks_total": metrics.isr_shrinks, "isr_expands_total": metrics.isr_expands,
        "under_replicated_partitions": gauges.under_replicated_partitions,
        "under_min_isr_partitions": gauges.under_min_isr_partitions,
        "at_min_isr_partitions": gauges.at_min_isr_partitions,
        "leader_count": gauges.leader_count, "partition_count": gauges.partition_count,
        "max_lag_messages": gauges.max_lag_messages,
        "fetch_purgatory_size": manager.fetch_purgatory.size,
        "produce_purgatory_size": manager.produce_purgatory.size,
    }
    partitions = [partition_line(metrics, partition, now_ms) for partition in manager.partitions.values()]
    return encode_line("broker", LOCAL, now_ms, {"broker": broker, "partitions": partitions})


def dump_line(dump: BrokerDump, now_ms: int) -> bytes:
    kind, fields = dump.snapshot(now_ms)
    return encode_line(kind, LOCAL, now_ms, fields)


def assert_same_as_full_dump(dump: BrokerDump, manager: ReplicaManager, now_ms: int) -> None:
    line, full = dump_line(dump, now_ms), full_dump_line(manager, now_ms)
    assert json.loads(line) == json.loads(full)
    assert line == full


async def apply(manager: ReplicaManager, partition: int, *, leader: int, isr: list[int], leader_epoch: int = 1,
                partition_epoch: int = 1) -> None:
    state = LeaderAndIsrPartitionState("t", partition, 1, leader, leader_epoch, isr, partition_epoch,
                                       [LOCAL, SECOND, THIRD])
    error, errors = await manager.become_leader_or_follower(
        LeaderAndIsrRequest(3000, 1, -1, [LeaderAndIsrTopicState("t", TOPIC_ID, [state])], []))
    assert error == ErrorCode.none and set(errors.values()) == {ErrorCode.none}


def batch(records: int) -> memoryview:
    return memoryview(bytearray(build_batch([(None, b"v" * 50, [], 1000)] * records)))


def produce(manager: ReplicaManager, partition: int, records: int) -> None:
    assert manager.append_to_partition("t", partition, batch(records), 1).error_code == ErrorCode.none


def follower_fetch(manager: ReplicaManager, partition: int, replica: int, offset: int) -> None:
    result = manager.read_partition("t", partition, offset, current_leader_epoch=-1, last_fetched_epoch=-1,
                                    max_bytes=1 << 20, fetcher=FollowerFetch(replica), min_one_batch=True)
    assert result.error_code == ErrorCode.none


def append_as_follower(manager: ReplicaManager, partition: int, records: int, leader_high_watermark: int) -> None:
    """What the replica fetcher does with a fetched partition: append, take the HW, count."""
    log = manager.get_partition("t", partition).log
    data = bytearray(build_batch([(None, b"f" * 50, [], 1000)] * records))
    data[0:8] = log.log_end_offset.to_bytes(8, "big")  # the leader's base offset
    info = log.append_as_follower(memoryview(data))
    log.maybe_update_high_watermark(leader_high_watermark)
    manager.metrics.record_follower_fetch(TopicPartition("t", partition), info.num_bytes, leader_high_watermark)


async def test_the_dump_line_equals_the_full_dump_through_replication_changes(manager, dump, clock, proposals):
    for index in range(3):
        await apply(manager, index, leader=LOCAL, isr=[LOCAL, SECOND, THIRD])
        follower_fetch(manager, index, SECOND, 0)  # caught up: only a change can alter their lines
        follower_fetch(manager, index, THIRD, 0)
    for index in range(3, 6):
        await apply(manager, index, leader=SECOND, isr=[SECOND, LOCAL, THIRD])
    assert_same_as_full_dump(dump, manager, clock.now)

    steps = [
        lambda: produce(manager, 0, 4),  # both followers now behind: the line's lag_ms grows by itself
        lambda: follower_fetch(manager, 0, SECOND, 4),
        lambda: None,  # nothing changed but the clock
        lambda: follower_fetch(manager, 0, THIRD, 4),  # caught up: the HW moves
        lambda: follower_fetch(manager, 0, THIRD, 4),  # only its last fetch time moves
        lambda: append_as_follower(manager, 3, 3, leader_high_watermark=5),  # a follower lagging its leader
        lambda: append_as_follower(manager, 3, 2, leader_high_watermark=5),  # caught up
        lambda: manager.metrics.record_follower_fetch(TopicPartition("t", 4), 0, leader_high_watermark=9),
        lambda: append_as_follower(manager, 4, 2, leader_high_watermark=0),
        lambda: manager.get_partition("t", 4).log.maybe_update_high_watermark(2),  # only the HW moves
        lambda: manager.metrics.record_fetch_out("t", 100, to_follower=False),
        lambda: manager.get_partition("t", 3).log.truncate_to(2),  # a follower's divergence
        lambda: manager.get_partition("t", 1).update_min_insync_replicas(3),
        lambda: produce(manager, 2, 1),
        lambda: follower_fetch(manager, 2, SECOND, 1),
        lambda: follower_fetch(manager, 2, THIRD, 1),
        lambda: manager.get_partition("t", 2).log.maybe_increment_log_start_offset(1),  # DeleteRecords
    ]
    for step in steps:
        step()
        clock.now += 250
        assert_same_as_full_dump(dump, manager, clock.now)

    produce(manager, 1, 2)
    clock.now += LAG_MS + 1  # nobody fetched it: the leader shrinks its ISR, the controller commits that
    assert manager.maybe_shrink_isr() == 1
    ((partition, change),) = proposals
    assert_same_as_full_dump(dump, manager, clock.now)
    manager.complete_isr_change(partition, change, ErrorCode.none, leader_epoch=1, isr=(LOCAL,), partition_epoch=2)
    assert_same_as_full_dump(dump, manager, clock.now)
    follower_fetch(manager, 1, SECOND, 2)  # caught up again: the leader proposes to take it back
    (partition, change) = proposals[-1]
    assert change.proposed_isr == (LOCAL, SECOND)
    follower_fetch(manager, 1, THIRD, 2)  # caught up too, its turn after this change: no line moves with the clock
    assert_same_as_full_dump(dump, manager, clock.now)
    manager.complete_isr_change(partition, change, ErrorCode.none, leader_epoch=1, isr=(LOCAL, SECOND),
                                partition_epoch=3)
    assert_same_as_full_dump(dump, manager, clock.now)
    await apply(manager, 4, leader=LOCAL, isr=[LOCAL, THIRD], leader_epoch=2, partition_epoch=2)  # we lead now
    clock.now += 1_000
    assert_same_as_full_dump(dump, manager, clock.now)
    await apply(manager, 0, leader=THIRD, isr=[THIRD, LOCAL], leader_epoch=2, partition_epoch=2)  # we follow now
    assert_same_as_full_dump(dump, manager, clock.now)
    await manager.stop_replicas(stop_request(5, delete=True))
    await manager.stop_replicas(stop_request(3, delete=False))
    assert_same_as_full_dump(dump, manager, clock.now)
    await apply(manager, 6, leader=LOCAL, isr=[LOCAL, SECOND, THIRD])  # a new partition goes last
    assert_same_as_full_dump(dump, manager, clock.now)


async def test_retention_and_log_cleaning_show_in_the_next_dump(tmp_path, clock):
    config = LogConfig(segment_bytes=1 << 20, retention_ms=1_000)
    manager = ReplicaManager(LOCAL, LogManager([tmp_path], config, clock_ms=clock), config, 1, clock_ms=clock,
                             replica_lag_time_max_ms=LAG_MS, fetch_purgatory_size=10, produce_purgatory_size=10,
                             metrics=BrokerMetrics(LOCAL))
    dump = BrokerDump(manager.metrics, manager)
    state = LeaderAndIsrPartitionState("t", 0, 1, LOCAL, 1, [LOCAL], 1, [LOCAL])
    await manager.become_leader_or_follower(
        LeaderAndIsrRequest(3000, 1, -1, [LeaderAndIsrTopicState("t", TOPIC_ID, [state])], []))
    produce(manager, 0, 5)
    log = manager.get_partition("t", 0).log
    log.roll()
    produce(manager, 0, 1)
    assert_same_as_full_dump(dump, manager, clock.now)
    clock.now += 1_000_000  # the first segment is past retention.ms
    assert log.delete_retention_segments() == 1
    line = json.loads(dump_line(dump, clock.now))
    assert line["partitions"][0]["log_start_offset"] == 5
    assert line["partitions"][0]["size_bytes"] == log.size_in_bytes
    assert_same_as_full_dump(dump, manager, clock.now)


async def test_an_unchanged_partition_is_neither_rebuilt_nor_encoded_again(manager, dump, clock):
    for index in range(20):
        await apply(manager, index, leader=LOCAL, isr=[LOCAL, SECOND, THIRD])
        follower_fetch(manager, index, SECOND, 0)  # caught up: no follower's lag moves with the clock
        follower_fetch(manager, index, THIRD, 0)
    dump_line(dump, clock.now)
    assert (dump.lines_built, dump._lines.items_encoded) == (20, 20)

    for _ in range(3):  # idle: nothing built, nothing encoded, the same bytes
        clock.now += 1_000
        assert_same_as_full_dump(dump, manager, clock.now)
    assert (dump.lines_built, dump._lines.items_encoded) == (20, 20)

    produce(manager, 7, 2)
    follower_fetch(manager, 7, SECOND, 2)
    follower_fetch(manager, 7, THIRD, 2)
    clock.now += 1_000
    assert_same_as_full_dump(dump, manager, clock.now)
    assert (dump.lines_built, dump._lines.items_encoded) == (21, 21)


async def test_a_leader_line_with_a_follower_behind_is_rebuilt_every_dump_until_it_catches_up(
        manager, dump, clock):
    for index in range(5):
        await apply(manager, index, leader=LOCAL, isr=[LOCAL, SECOND, THIRD])
    for index in range(5):  # every follower fetched at the LEO once: all caught up
        follower_fetch(manager, index, SECOND, 0)
        follower_fetch(manager, index, THIRD, 0)
    dump_line(dump, clock.now)
    produce(manager, 2, 3)
    follower_fetch(manager, 2, SECOND, 3)
    built = dump.lines_built
    for _ in range(3):  # broker 3 is behind: lag_ms moves with the clock, only this line is rebuilt
        clock.now += 1_000
        assert_same_as_full_dump(dump, manager, clock.now)
    assert dump.lines_built == built + 3
    follower_fetch(manager, 2, THIRD, 3)
    clock.now += 1_000
    assert_same_as_full_dump(dump, manager, clock.now)
    clock.now += 1_000
    assert_same_as_full_dump(dump, manager, clock.now)
    assert dump.lines_built == built + 4


async def test_without_dumps_partitions_report_no_changes(manager):
    await apply(manager, 0, leader=LOCAL, isr=[LOCAL, SECOND, THIRD])
    produce(manager, 0, 1)
    partition = manager.get_partition("t", 0)
    assert manager.metrics.changed is None
    assert partition.change_listener is None and partition.log.change_listener is None


def stop_request(partition: int, *, delete: bool) -> StopReplicaRequest:
    # Leader epoch -2: Kafka's EpochDuringDelete, accepted whatever the partition's epoch.
    return StopReplicaRequest(3000, 1, -1, [
        StopReplicaTopicState("t", [StopReplicaPartitionState(partition, -2, delete)])])


async def test_the_file_budget_shows_its_open_files_and_evictions_in_the_dump_and_to_prometheus(tmp_path, clock):
    budget = FileBudget(MIN_OPEN_FILES)
    manager = ReplicaManager(LOCAL, LogManager([tmp_path], CONFIG, clock_ms=clock, file_budget=budget), CONFIG, 2,
                             clock_ms=clock, replica_lag_time_max_ms=LAG_MS, fetch_purgatory_size=10,
                             produce_purgatory_size=10, alter_isr=lambda partition, change: None,
                             metrics=BrokerMetrics(LOCAL))
    extra = 6
    for index in range(MIN_OPEN_FILES + extra):  # a log file each: the first `extra` give theirs back
        await apply(manager, index, leader=LOCAL, isr=[LOCAL, SECOND, THIRD])
        produce(manager, index, 1)
    _, fields = BrokerDump(manager.metrics, manager).snapshot(clock.now)
    assert {key: fields["broker"][key] for key in ("open_segment_files", "open_segment_files_max",
                                                   "segment_file_evictions_total")} == {
        "open_segment_files": MIN_OPEN_FILES, "open_segment_files_max": MIN_OPEN_FILES,
        "segment_file_evictions_total": extra}
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(manager.metrics, manager))
    text = generate_latest(registry).decode()
    for sample in (f"replog_log_open_segment_files {MIN_OPEN_FILES}.0",
                   f"replog_log_open_segment_files_max {MIN_OPEN_FILES}.0",
                   f"replog_log_segment_file_evictions_total {extra}.0"):
        assert sample in text, sample
