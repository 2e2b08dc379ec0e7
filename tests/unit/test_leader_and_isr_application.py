"""LeaderAndIsr applied by a real ReplicaManager on real logs: a request with many partitions shares the
event loop, requests apply one at a time in arrival order, and a partition that fails on disk is answered
with its own error while the rest of the request applies."""

import asyncio
import errno
import uuid

import pytest
from kio.schema.errors import ErrorCode

from replog.broker import replica_manager as replica_manager_module
from replog.broker.replica_manager import ReplicaManager
from replog.log.checkpoint import LeaderEpochCheckpointFile
from replog.log.config import LogConfig
from replog.log.epoch_cache import LEADER_EPOCH_CHECKPOINT
from replog.log.log_manager import LogManager
from replog.protocol.control import LeaderAndIsrPartitionState, LeaderAndIsrRequest, LeaderAndIsrTopicState

LOCAL, OTHER = 1, 2
TOPIC_ID = uuid.uuid4()
CONFIG = LogConfig(segment_bytes=4096, segment_index_bytes=4096)


def replica_manager(log_dir) -> ReplicaManager:
    return ReplicaManager(LOCAL, LogManager([log_dir], CONFIG, clock_ms=lambda: 1_000), CONFIG, 1,
                          clock_ms=lambda: 1_000, replica_lag_time_max_ms=10_000, fetch_purgatory_size=10,
                          produce_purgatory_size=10, alter_isr=lambda partition, change: None)


def leader_and_isr(partitions: int, *, leader: int, leader_epoch: int, controller_epoch: int = 1,
                   topic_id: uuid.UUID = TOPIC_ID) -> LeaderAndIsrRequest:
    states = [LeaderAndIsrPartitionState("t", p, controller_epoch, leader, leader_epoch, [LOCAL, OTHER],
                                         leader_epoch, [LOCAL, OTHER]) for p in range(partitions)]
    return LeaderAndIsrRequest(3000, controller_epoch, -1, [LeaderAndIsrTopicState("t", topic_id, states)], [])


@pytest.fixture
def slice_per_partition(monkeypatch):
    """Yield to the event loop after every partition, so that interleavings are deterministic."""
    monkeypatch.setattr(replica_manager_module, "STATE_CHANGE_SLICE_S", 0)


async def test_a_large_request_lets_other_tasks_run_while_it_applies(tmp_path, slice_per_partition):
    manager = replica_manager(tmp_path)
    leaders_seen: list[int] = []
    applying = asyncio.create_task(manager.become_leader_or_follower(
        leader_and_isr(40, leader=LOCAL, leader_epoch=1)))
    while not applying.done():
        leaders_seen.append(sum(1 for p in manager.partitions.values() if p.is_leader))
        await asyncio.sleep(0)
    error, errors = applying.result()
    assert error == ErrorCode.none and set(errors.values()) == {ErrorCode.none}
    assert len(errors) == 40
    # The observer ran between partitions, not only before and after the whole request.
    assert any(0 < seen < 40 for seen in leaders_seen), leaders_seen
    assert all(p.is_leader and p.leader_epoch == 1 for p in manager.partitions.values())


async def test_requests_apply_one_at_a_time_in_arrival_order(tmp_path, slice_per_partition):
    manager = replica_manager(tmp_path)
    first = asyncio.create_task(manager.become_leader_or_follower(
        leader_and_isr(20, leader=LOCAL, leader_epoch=1)))
    second = asyncio.create_task(manager.become_leader_or_follower(
        leader_and_isr(20, leader=OTHER, leader_epoch=2)))
    for result in await asyncio.gather(first, second):
        assert result[0] == ErrorCode.none and set(result[1].values()) == {ErrorCode.none}
    assert {(p.state.leader, p.leader_epoch) for p in manager.partitions.values()} == {(OTHER, 2)}
    # The first request made us leader in epoch 1 before the second moved leadership on.
    assert all(p.log.epoch_cache.latest_epoch == 1 for p in manager.partitions.values())


async def test_a_log_that_cannot_be_created_takes_its_dir_offline_and_the_rest_applies(tmp_path):
    # Kafka's LogManager.getOrCreateLog: an IOException creating a log fails its whole dir (KIP-112).
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    (first / "t-2").write_text("a file where the partition's directory should go")
    manager = ReplicaManager(LOCAL, LogManager([first, second], CONFIG, clock_ms=lambda: 1_000), CONFIG, 1,
                             clock_ms=lambda: 1_000, replica_lag_time_max_ms=10_000, fetch_purgatory_size=10,
                             produce_purgatory_size=10, alter_isr=lambda partition, change: None)
    error, errors = await manager.become_leader_or_follower(leader_and_isr(4, leader=LOCAL, leader_epoch=1))
    assert error == ErrorCode.none
    # New logs alternate between the dirs: t-0 and t-2 in the first, which is now offline.
    assert errors == {(TOPIC_ID, 0): ErrorCode.kafka_storage_error, (TOPIC_ID, 1): ErrorCode.none,
                      (TOPIC_ID, 2): ErrorCode.kafka_storage_error, (TOPIC_ID, 3): ErrorCode.none}
    assert manager.log_manager.failure_channel.offline_dirs == [first]
    assert manager.get_partition("t", 2) is None
    assert manager.get_partition("t", 3).is_leader


async def test_a_log_on_disk_with_another_topic_id_answers_inconsistent_topic_id(tmp_path):
    old_topic = uuid.uuid4()
    manager = replica_manager(tmp_path)
    await manager.become_leader_or_follower(leader_and_isr(1, leader=LOCAL, leader_epoch=1, topic_id=old_topic))
    manager.log_manager.shutdown()

    # Restarted: the old topic's log is on disk, and a new topic of the same name arrives.
    restarted = replica_manager(tmp_path)
    error, errors = await restarted.become_leader_or_follower(leader_and_isr(2, leader=LOCAL, leader_epoch=1))
    assert error == ErrorCode.none
    assert errors == {(TOPIC_ID, 0): ErrorCode.inconsistent_topic_id, (TOPIC_ID, 1): ErrorCode.none}
    assert restarted.log_manager.get_log("t", 0).topic_id == old_topic


async def test_shutdown_waits_for_the_request_being_applied(tmp_path, slice_per_partition):
    manager = replica_manager(tmp_path)
    applying = asyncio.create_task(manager.become_leader_or_follower(
        leader_and_isr(20, leader=LOCAL, leader_epoch=1)))
    await asyncio.sleep(0)  # the request has started: it holds the state-change lock
    await manager.shutdown()
    assert applying.done()
    assert set(applying.result()[1].values()) == {ErrorCode.none}
    assert len(manager.partitions) == 20


async def test_a_partition_named_twice_in_one_request_gets_one_log(tmp_path):
    manager = replica_manager(tmp_path)
    request = leader_and_isr(2, leader=LOCAL, leader_epoch=1)
    request.topic_states.append(leader_and_isr(1, leader=LOCAL, leader_epoch=1).topic_states[0])
    error, errors = await manager.become_leader_or_follower(request)
    assert error == ErrorCode.none
    assert errors[(TOPIC_ID, 0)] in (ErrorCode.none, ErrorCode.stale_controller_epoch)
    assert len(manager.log_manager.all_logs()) == 2 and manager.get_partition("t", 0).is_leader


async def test_new_logs_this_broker_leads_start_with_the_leader_epoch_written_by_their_creation(
        tmp_path, monkeypatch):
    manager = replica_manager(tmp_path)
    persisted = []
    real_write = LeaderEpochCheckpointFile.write

    def recording_write(checkpoint, entries, *, durable=True):
        persisted.append((checkpoint.path.parent.name, list(entries), durable))
        real_write(checkpoint, entries, durable=durable)

    monkeypatch.setattr(LeaderEpochCheckpointFile, "write", recording_write)
    request = leader_and_isr(2, leader=LOCAL, leader_epoch=4)
    request.topic_states[0].partition_states[1].leader = OTHER
    error, _ = await manager.become_leader_or_follower(request)
    assert error == ErrorCode.none
    # One write, in the creation batch (made durable by its file system sync), none by make_leader.
    assert persisted == [("t-0", [(4, 0)], False)]
    assert manager.get_partition("t", 0).log.epoch_cache.entries() == ((4, 0),)
    assert manager.get_partition("t", 1).log.epoch_cache.entries() == ()
    assert LeaderEpochCheckpointFile(tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT).read() == [(4, 0)]


async def test_new_logs_whose_sync_fails_are_answered_with_a_storage_error_and_their_dir_goes_offline(
        tmp_path, monkeypatch):
    def failing_sync(planned):
        raise OSError(errno.EIO, "syncfs failed")

    monkeypatch.setattr(LogManager, "sync_new_logs", staticmethod(failing_sync))
    manager = replica_manager(tmp_path)
    error, errors = await manager.become_leader_or_follower(leader_and_isr(2, leader=LOCAL, leader_epoch=1))
    assert error == ErrorCode.none
    assert errors == {(TOPIC_ID, 0): ErrorCode.kafka_storage_error, (TOPIC_ID, 1): ErrorCode.kafka_storage_error}
    assert manager.log_manager.failure_channel.offline_dirs == [tmp_path]
    assert manager.get_partition("t", 0) is None
