"""A failover's LeaderAndIsr, applied by a real ReplicaManager on real logs, writes each new leader epoch's
checkpoint in the broker's checkpoint writer: no fsync on the event loop's thread, and every epoch on disk
once the writer is flushed."""

import os
import threading
import uuid

import pytest
from kio.schema.errors import ErrorCode

from replog.broker.replica_manager import ReplicaManager
from replog.log.checkpoint import LeaderEpochCheckpointFile
from replog.log.config import LogConfig
from replog.log.epoch_cache import LEADER_EPOCH_CHECKPOINT
from replog.log.log_manager import LogManager
from replog.protocol.control import LeaderAndIsrPartitionState, LeaderAndIsrRequest, LeaderAndIsrTopicState

LOCAL, VICTIM = 1, 2
TOPIC_ID = uuid.uuid4()
CONFIG = LogConfig(segment_bytes=4096, segment_index_bytes=4096)
PARTITIONS = 30


def leader_and_isr(*, leader: int, leader_epoch: int) -> LeaderAndIsrRequest:
    isr = [LOCAL, VICTIM] if leader == VICTIM else [LOCAL]
    states = [LeaderAndIsrPartitionState("t", p, 1, leader, leader_epoch, isr, leader_epoch, [LOCAL, VICTIM])
              for p in range(PARTITIONS)]
    return LeaderAndIsrRequest(3000, 1, -1, [LeaderAndIsrTopicState("t", TOPIC_ID, states)], [])


@pytest.fixture
def fsync_threads(monkeypatch) -> list[str]:
    """The name of the thread of every os.fsync from now on."""
    threads: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        threads.append(threading.current_thread().name)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    return threads


async def test_becoming_leader_of_many_partitions_fsyncs_nothing_on_the_event_loop(tmp_path, fsync_threads):
    log_manager = LogManager([tmp_path], CONFIG, clock_ms=lambda: 1_000)
    log_manager.start_background_checkpoints()
    manager = ReplicaManager(LOCAL, log_manager, CONFIG, 1, clock_ms=lambda: 1_000, replica_lag_time_max_ms=10_000,
                             fetch_purgatory_size=10, produce_purgatory_size=10,
                             alter_isr=lambda partition, change: None)
    error, errors = await manager.become_leader_or_follower(leader_and_isr(leader=VICTIM, leader_epoch=1))
    assert error == ErrorCode.none and set(errors.values()) == {ErrorCode.none}
    await log_manager.flush_background_checkpoints()
    fsync_threads.clear()

    loop_thread = threading.current_thread().name
    error, errors = await manager.become_leader_or_follower(leader_and_isr(leader=LOCAL, leader_epoch=2))
    assert error == ErrorCode.none and set(errors.values()) == {ErrorCode.none}
    assert all(p.is_leader and p.log.epoch_cache.latest_epoch == 2 for p in manager.partitions.values())
    assert loop_thread not in fsync_threads  # before: one file and one directory fsync per new leader

    await log_manager.flush_background_checkpoints()
    # A file and its directory per partition, all in the writer's thread.
    assert len(fsync_threads) == 2 * PARTITIONS
    assert {name.split("_")[0] for name in fsync_threads} == {"checkpoint-writer"}
    for p in range(PARTITIONS):
        assert LeaderEpochCheckpointFile(tmp_path / f"t-{p}" / LEADER_EPOCH_CHECKPOINT).read() == [(2, 0)]
    await log_manager.stop_background_checkpoints()
    log_manager.shutdown()
