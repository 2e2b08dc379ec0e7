"""Broker metrics on a real ReplicaManager with a fake clock: what produce, follower fetches and ISR changes
add up to, the replication-health gauges, each follower's lag as the leader sees it, and the dump line and
Prometheus families built from them (docs/metrics-dumps.md)."""

import json
import uuid

import pytest
from kio.schema.errors import ErrorCode
from prometheus_client import CollectorRegistry, generate_latest

from replog.broker.fetch_params import FollowerFetch
from replog.broker.metrics import BrokerCollector, BrokerMetrics, request_name
from replog.broker.metrics_dump import BrokerDump
from replog.broker.replica_manager import ReplicaManager
from replog.broker.replication_rules import IsrChangeKind
from replog.log.config import LogConfig
from replog.log.log_manager import LogManager
from replog.log.partition_log import TopicPartition
from replog.metrics.dump_writer import encode_line
from replog.protocol.apis import ApiKey
from replog.protocol.control import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
)
from replog.protocol.records import build_batch

LOCAL, SECOND, THIRD = 1, 2, 3
TOPIC_ID = uuid.uuid4()
LAG_MS = 10_000
CONFIG = LogConfig(segment_bytes=1 << 20)


class Clock:
    now = 5_000_000

    def __call__(self) -> int:
        return self.now


class Events:
    """Stands in for the MetricsDumper: records the event lines the metrics queue."""

    def __init__(self) -> None:
        self.lines = []

    def event(self, kind: str, fields: dict, *, ts_ms=None) -> None:
        self.lines.append((kind, fields))


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def proposals():
    return []


def replica_manager(log_dir, clock: Clock, proposals: list, metrics: BrokerMetrics) -> ReplicaManager:
    """Broker LOCAL's replica manager, its ISR changes proposed into `proposals`."""
    return ReplicaManager(LOCAL, LogManager([log_dir], CONFIG, clock_ms=clock), CONFIG, 2, clock_ms=clock,
                          replica_lag_time_max_ms=LAG_MS, fetch_purgatory_size=10, produce_purgatory_size=10,
                          alter_isr=lambda partition, change: proposals.append((partition, change)),
                          metrics=metrics)


@pytest.fixture
async def manager(tmp_path, clock, proposals):
    metrics = BrokerMetrics(LOCAL)
    metrics.dumper = Events()
    manager = replica_manager(tmp_path, clock, proposals, metrics)
    await apply(manager, leader=LOCAL, leader_epoch=1, partition_epoch=1, isr=[LOCAL, SECOND, THIRD])
    return manager


@pytest.fixture
def dump(manager):
    return BrokerDump(manager.metrics, manager)


def dump_line(dump: BrokerDump, now_ms: int) -> tuple[str, dict]:
    """The snapshot as the dump file has it: encoded (the partitions array in one piece) and parsed."""
    kind, fields = dump.snapshot(now_ms)
    return kind, json.loads(encode_line(kind, LOCAL, now_ms, fields))


async def apply(manager: ReplicaManager, *, leader: int, leader_epoch: int, partition_epoch: int, isr: list[int],
                partition: int = 0) -> None:
    state = LeaderAndIsrPartitionState("t", partition, 1, leader, leader_epoch, isr, partition_epoch,
                                       [LOCAL, SECOND, THIRD])
    error, errors = await manager.become_leader_or_follower(
        LeaderAndIsrRequest(3000, 1, -1, [LeaderAndIsrTopicState("t", TOPIC_ID, [state])], []))
    assert error == ErrorCode.none and set(errors.values()) == {ErrorCode.none}


def produce(manager: ReplicaManager, records: int, value: bytes = b"v" * 50):
    batch = memoryview(bytearray(build_batch([(None, value, [], 1000)] * records)))
    result = manager.append_to_partition("t", 0, batch, 1)
    assert result.error_code == ErrorCode.none
    return result.info


def follower_fetch(manager: ReplicaManager, replica: int, offset: int) -> None:
    result = manager.read_partition("t", 0, offset, current_leader_epoch=-1, last_fetched_epoch=-1,
                                    max_bytes=1 << 20, fetcher=FollowerFetch(replica), min_one_batch=True)
    assert result.error_code == ErrorCode.none


def lines(manager: ReplicaManager, kind: str) -> list[dict]:
    return [fields for k, fields in manager.metrics.dumper.lines if k == kind]


def test_produce_counts_bytes_and_records_per_partition_and_topic_but_not_duplicates(manager):
    first = produce(manager, 3)
    second = produce(manager, 2)
    counters = manager.metrics.partitions[TopicPartition("t", 0)]
    assert (counters.bytes_in, counters.messages_in) == (first.num_bytes + second.num_bytes, 5)
    topic = manager.metrics.topics["t"]
    assert (topic.bytes_in, topic.messages_in) == (first.num_bytes + second.num_bytes, 5)

    idempotent = build_batch([(None, b"x", [], 1000)], producer_id=7, producer_epoch=0, base_sequence=0)
    for _ in range(2):  # the retry is a duplicate: acknowledged again, appended and counted once
        manager.append_to_partition("t", 0, memoryview(bytearray(idempotent)), 1)
    assert counters.messages_in == 6
    assert counters.bytes_in == first.num_bytes + second.num_bytes + len(idempotent)


def test_follower_lag_in_messages_bytes_and_time_as_the_leader_sees_it(manager, dump, clock):
    infos = [produce(manager, 4) for _ in range(3)]  # 12 records in three batches
    follower_fetch(manager, SECOND, 12)  # caught up now
    follower_fetch(manager, THIRD, 4)  # one batch in: two behind
    clock.now += 700
    (line,) = dump_line(dump, clock.now)[1]["partitions"]
    lags = {f["broker_id"]: f for f in line["followers"]}
    assert lags[SECOND] == {
        "broker_id": SECOND, "fetch_offset": 12, "last_fetch_ms": clock.now - 700,
        "last_caught_up_ms": clock.now - 700, "lag_messages": 0, "lag_bytes": 0, "lag_ms": 0}
    assert lags[THIRD]["lag_messages"] == 8
    assert lags[THIRD]["lag_bytes"] == infos[1].num_bytes + infos[2].num_bytes
    # Caught up last at the start of this leadership (an ISR member at make_leader), 700 ms ago.
    assert lags[THIRD]["lag_ms"] == 700
    assert (line["log_end_offset"], line["high_watermark"], line["leader"], line["isr"]) == (12, 4, LOCAL, [1, 2, 3])


async def test_a_follower_not_caught_up_in_this_epoch_lags_since_the_epoch_began(manager, dump, clock):
    info = produce(manager, 5)
    clock.now += 300
    await apply(manager, leader=LOCAL, leader_epoch=2, partition_epoch=2, isr=[LOCAL, SECOND])
    clock.now += 1_200
    (line,) = dump_line(dump, clock.now)[1]["partitions"]
    third = next(f for f in line["followers"] if f["broker_id"] == THIRD)
    assert (third["fetch_offset"], third["lag_messages"], third["last_caught_up_ms"], third["lag_ms"]) == (
        -1, 5, 0, 1_200)
    assert third["lag_bytes"] == info.num_bytes  # from the log start: no fetch position known


async def test_replication_gauges_count_led_partitions_by_isr_size(manager):
    await apply(manager, partition=1, leader=LOCAL, leader_epoch=1, partition_epoch=1, isr=[LOCAL, SECOND])
    await apply(manager, partition=2, leader=LOCAL, leader_epoch=1, partition_epoch=1, isr=[LOCAL])
    await apply(manager, partition=3, leader=SECOND, leader_epoch=1, partition_epoch=1, isr=[SECOND])
    gauges = manager.metrics.replication_gauges(manager.partitions)
    # min.insync.replicas is 2: partition 1 is at it, partition 2 below; partition 3 is led elsewhere.
    assert (gauges.leader_count, gauges.partition_count) == (3, 4)
    assert (gauges.under_replicated_partitions, gauges.under_min_isr_partitions, gauges.at_min_isr_partitions) == (
        2, 1, 1)


async def test_isr_changes_become_events_and_only_the_leaders_own_count_as_shrinks_and_expands(
        manager, dump, clock, proposals):
    produce(manager, 2)
    assert lines(manager, "isr_change") == [{
        "topic": "t", "partition": 0, "leader_epoch": 1, "partition_epoch": 1, "isr_before": [],
        "isr_after": [1, 2, 3], "source": "controller", "replicas": [1, 2, 3], "min_isr": 2}]
    clock.now += LAG_MS + 1  # nobody fetched: both followers are out
    assert manager.maybe_shrink_isr() == 1
    (partition, change), = proposals
    assert change.kind is IsrChangeKind.SHRINK
    manager.complete_isr_change(partition, change, ErrorCode.none, leader_epoch=1, isr=(LOCAL,), partition_epoch=2)
    # The controller then fences broker 3 and expands nothing: the LeaderAndIsr restores broker 2 only.
    await apply(manager, leader=LOCAL, leader_epoch=1, partition_epoch=3, isr=[LOCAL, SECOND])
    assert [(e["isr_before"], e["isr_after"], e["source"]) for e in lines(manager, "isr_change")[1:]] == [
        ([1, 2, 3], [1], "leader"), ([1], [1, 2], "controller")]
    assert (manager.metrics.isr_shrinks, manager.metrics.isr_expands) == (1, 0)
    assert dump_line(dump, clock.now)[1]["broker"]["isr_shrinks_total"] == 1


async def test_a_replica_leaving_the_broker_starts_its_counters_again(manager):
    produce(manager, 3)
    await manager.stop_replicas(_delete_request())
    assert TopicPartition("t", 0) not in manager.metrics.partitions
    assert manager.metrics.topics["t"].messages_in == 3  # topic counters stay cumulative


def test_follower_side_lag_is_the_leaders_high_watermark_minus_our_log_end(tmp_path, clock):
    metrics = BrokerMetrics(LOCAL)
    tp = TopicPartition("t", 0)
    metrics.record_follower_fetch(tp, 1500, leader_high_watermark=40)
    metrics.record_follower_fetch(tp, 500, leader_high_watermark=50)
    assert metrics.partitions[tp].replication_bytes_in == 2000
    assert metrics.topics["t"].replication_bytes_in == 2000
    assert metrics.partitions[tp].leader_high_watermark == 50


async def test_broker_line_totals_and_purgatory_sizes(manager, dump, clock):
    info = produce(manager, 3)
    manager.metrics.record_fetch_out("t", 100, to_follower=False)
    manager.metrics.record_fetch_out("t", 40, to_follower=True)
    kind, fields = dump_line(dump, clock.now)
    assert kind == "broker"
    broker = fields["broker"]
    assert {k: broker[k] for k in ("bytes_in_total", "messages_in_total", "bytes_out_total",
                                   "replication_bytes_out_total", "leader_count", "partition_count",
                                   "fetch_purgatory_size", "produce_purgatory_size")} == {
        "bytes_in_total": info.num_bytes, "messages_in_total": 3, "bytes_out_total": 100,
        "replication_bytes_out_total": 40, "leader_count": 1, "partition_count": 1,
        "fetch_purgatory_size": 0, "produce_purgatory_size": 0}


def test_request_names_are_kafkas():
    assert [request_name(k) for k in (ApiKey.PRODUCE, ApiKey.LEADER_AND_ISR, ApiKey.OFFSET_FOR_LEADER_EPOCH)] == [
        "Produce", "LeaderAndIsr", "OffsetForLeaderEpoch"]


def test_request_times_split_into_local_and_remote():
    metrics = BrokerMetrics(LOCAL)
    metrics.observe_request(ApiKey.FETCH, 0.3, 480.0)
    metrics.observe_request(ApiKey.FETCH, 0.2, 0.2)
    stats = metrics.requests[ApiKey.FETCH]
    assert stats.requests == 2
    assert (stats.local_ms.sum_ms, stats.remote_ms.sum_ms, stats.total_ms.sum_ms) == pytest.approx((0.5, 479.7, 480.2))


async def test_prometheus_families_carry_kafkas_names_and_values(manager, clock):
    produce(manager, 3)
    follower_fetch(manager, SECOND, 3)
    manager.metrics.observe_request(ApiKey.PRODUCE, 1.0, 1.0)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(manager.metrics, manager))
    text = generate_latest(registry).decode()
    for sample in (
        "kafka_server_replicamanager_leadercount 1.0",
        "kafka_server_replicamanager_underreplicatedpartitions 0.0",
        'kafka_server_brokertopicmetrics_messagesin_total{topic="t"} 3.0',
        'kafka_log_log_logendoffset{partition="0",topic="t"} 3.0',
        'replog_partition_follower_lag_messages{follower="2",partition="0",topic="t"} 0.0',
        'replog_partition_follower_lag_messages{follower="3",partition="0",topic="t"} 3.0',
        'kafka_network_requestmetrics_requests_total{request="Produce"} 1.0',
        'kafka_network_requestmetrics_totaltimems_bucket{le="1.0",request="Produce"} 1.0',
        'kafka_server_delayedoperationpurgatory_purgatorysize{delayedOperation="Fetch"} 0.0',
    ):
        assert sample in text, sample


def _delete_request() -> StopReplicaRequest:
    return StopReplicaRequest(3000, 1, -1, [StopReplicaTopicState("t", [StopReplicaPartitionState(0, -2, True)])])
