"""A failing disk takes its whole log dir offline (KIP-112, Kafka's LogDirFailureChannel): driven sans-IO
with injected failing file operations, on real logs, through the LogManager and the ReplicaManager."""

import errno
import os
import uuid

import pytest
from kio.schema.errors import ErrorCode

from replog.broker.delayed_produce import DelayedProduce
from replog.broker.fetch_params import CONSUMER
from replog.broker.replica_manager import ReplicaManager
from replog.log.config import LogConfig
from replog.log.errors import StorageError
from replog.log.log_manager import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT, LogManager
from replog.log.segment_files import SegmentFileOps
from replog.protocol.control import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
    LiveLeader,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
)
from replog.protocol.records import build_batch

LOCAL, OTHER = 1, 2
TOPIC_ID = uuid.uuid4()
CONFIG = LogConfig(segment_bytes=1 << 20, segment_index_bytes=4096)
PARKED_MS = 60_000  # only the failure under test may complete a parked operation


class FailingDisk(SegmentFileOps):
    """The segments' file operations, failing on demand for files under `failing_dir`.

    A write first takes `partial_bytes` of the data (as a nearly full disk does), then fails.
    """

    def __init__(self) -> None:
        self.failing_dir: str | None = None
        self.error = errno.ENOSPC
        self.partial_bytes = 0
        self.fail_reads = False
        self.fail_fsyncs = False

    def _fails(self, fd: int) -> bool:
        return self.failing_dir is not None and os.readlink(f"/proc/self/fd/{fd}").startswith(self.failing_dir)

    def write(self, fd, data):
        if not self._fails(fd):
            return super().write(fd, data)
        if self.partial_bytes:
            taken, self.partial_bytes = super().write(fd, data[:self.partial_bytes]), 0
            return taken
        raise OSError(self.error, "injected write failure")

    def pread(self, fd, size, position):
        if self.fail_reads and self._fails(fd):
            raise OSError(errno.EIO, "injected read failure")
        return super().pread(fd, size, position)

    def fsync(self, fd):
        if self.fail_fsyncs and self._fails(fd):
            raise OSError(errno.EIO, "injected fsync failure")
        super().fsync(fd)


def batch(count: int = 1) -> memoryview:
    return memoryview(bytearray(build_batch([(None, b"x" * 100, [], 1000)] * count)))


@pytest.fixture
def disk() -> FailingDisk:
    return FailingDisk()


@pytest.fixture
def dirs(tmp_path):
    return [tmp_path / "healthy", tmp_path / "failing"]


def log_manager(dirs, disk) -> LogManager:
    return LogManager(dirs, CONFIG, clock_ms=lambda: 1_000, file_ops=disk)


def log_in_failing_dir(manager: LogManager, dirs):
    """t-1, in the second dir: new logs go to the emptiest dir, the first one on a tie."""
    manager.get_or_create_log("t", 0, CONFIG)
    failing = manager.get_or_create_log("t", 1, CONFIG)
    assert failing.log_dir == dirs[1]
    return failing


# ------------------------------------------------------------------------------------------ storage layer


def test_a_torn_append_leaves_no_bytes_and_takes_the_dir_offline_once(dirs, disk):
    manager = log_manager(dirs, disk)
    healthy, failing = (manager.get_or_create_log("t", p, CONFIG) for p in (0, 1))
    assert failing.log_dir == dirs[1]
    failing.append_as_leader(batch(), leader_epoch=0)
    size_before = failing.active_segment.size
    reports = []
    manager.failure_channel.subscribe(lambda log_dir, error: reports.append((log_dir, error.errno)))

    disk.failing_dir, disk.partial_bytes = str(dirs[1]), 50  # half a batch fits, then the disk is full
    with pytest.raises(StorageError) as raised:
        failing.append_as_leader(batch(), leader_epoch=0)
    assert raised.value.errno == errno.ENOSPC
    # Nothing half-applied: the LEO did not move and the torn 50 bytes were cut off the file.
    assert failing.log_end_offset == 1
    assert failing.active_segment.size == size_before == failing.active_segment.log_path.stat().st_size
    assert reports == [(dirs[1], errno.ENOSPC)]
    assert manager.online_dirs == [dirs[0]]

    # Every later operation on the dir is refused without touching the disk, and reported no more.
    disk.failing_dir = None
    for operation in (lambda: failing.append_as_leader(batch(), leader_epoch=0),
                      lambda: failing.read(0, max_bytes=1 << 20, upper_bound=1),
                      lambda: failing.truncate_to(0), failing.roll, failing.flush):
        with pytest.raises(StorageError):
            operation()
    assert len(reports) == 1
    healthy.append_as_leader(batch(), leader_epoch=0)  # the other dir is untouched
    assert healthy.log_end_offset == 1


@pytest.mark.parametrize("failure", ["read", "fsync"])
def test_a_failed_read_or_fsync_takes_the_dir_offline(dirs, disk, failure):
    manager = log_manager(dirs, disk)
    failing = log_in_failing_dir(manager, dirs)
    # Two batches: a read of the first preads headers (the last appended batch's place is known without one).
    failing.append_as_leader(batch(), leader_epoch=0)
    failing.append_as_leader(batch(), leader_epoch=0)
    disk.failing_dir = str(dirs[1])
    setattr(disk, f"fail_{failure}s", True)
    with pytest.raises(StorageError) as raised:
        if failure == "read":
            failing.read(0, max_bytes=1 << 20, upper_bound=1)
        else:
            failing.flush()
    assert raised.value.errno == errno.EIO
    assert manager.failure_channel.offline_dirs == [dirs[1]]


def test_a_failed_checkpoint_write_takes_only_its_dir_offline(dirs, disk):
    manager = log_manager(dirs, disk)
    for p in (0, 1):
        manager.get_or_create_log("t", p, CONFIG)
    # A directory where the checkpoint file goes: the rename over it fails (an OSError, as a full disk's).
    (dirs[1] / RECOVERY_POINT_CHECKPOINT).mkdir()
    (dirs[1] / RECOVERY_POINT_CHECKPOINT / "occupied").touch()
    manager.checkpoint_recovery_points()
    assert manager.failure_channel.offline_dirs == [dirs[1]]
    assert (dirs[0] / RECOVERY_POINT_CHECKPOINT).is_file()


def test_an_offline_dir_is_not_marked_clean_and_recovers_at_restart(dirs, disk):
    manager = log_manager(dirs, disk)
    failing = log_in_failing_dir(manager, dirs)
    for _ in range(3):
        failing.append_as_leader(batch(), leader_epoch=0)
    disk.failing_dir, disk.partial_bytes = str(dirs[1]), 50
    with pytest.raises(StorageError):
        failing.append_as_leader(batch(), leader_epoch=0)
    assert manager.get_or_create_log("t", 2, CONFIG).log_dir == dirs[0]  # not the emptiest, but online
    manager.shutdown()
    assert (dirs[0] / CLEAN_SHUTDOWN_FILE).exists()
    assert not (dirs[1] / CLEAN_SHUTDOWN_FILE).exists()

    restarted = log_manager(dirs, FailingDisk())  # the disk has space again
    assert restarted.online_dirs == dirs
    recovered = restarted.get_log("t", 1)
    assert recovered.log_end_offset == 3
    recovered.append_as_leader(batch(), leader_epoch=0)
    assert recovered.log_end_offset == 4


def test_with_every_dir_offline_no_log_can_be_created(dirs, disk):
    manager = log_manager(dirs, disk)
    for log_dir in dirs:
        manager.failure_channel.report(log_dir, OSError(errno.EIO, "injected"))
    with pytest.raises(StorageError):
        manager.get_or_create_log("t", 9, CONFIG)


def test_a_dir_that_cannot_be_loaded_starts_offline_and_none_left_refuses_to_start(dirs, disk):
    dirs[1].write_text("a file where a log dir should be")
    manager = log_manager(dirs, disk)
    assert manager.failure_channel.offline_dirs == [dirs[1]]
    assert manager.get_or_create_log("t", 0, CONFIG).log_dir == dirs[0]
    with pytest.raises(StorageError):
        log_manager([dirs[1]], disk)


# --------------------------------------------------------------------------------------- replica manager


class RecordingFetchers:
    """Stands in for the ReplicaFetcherManager: records which partitions are followed."""

    def __init__(self) -> None:
        self.followed: set = set()

    def add_partitions(self, partitions) -> None:
        self.followed |= set(partitions)

    def remove_partitions(self, tps) -> dict:
        self.followed -= set(tps)
        return {}


def leader_and_isr(*partitions: tuple[int, int], leader_epoch: int = 1) -> LeaderAndIsrRequest:
    """(partition, leader) pairs of topic t, replicas LOCAL and OTHER, both in the ISR."""
    states = [LeaderAndIsrPartitionState("t", p, 1, leader, leader_epoch, [LOCAL, OTHER], leader_epoch,
                                         [LOCAL, OTHER]) for p, leader in partitions]
    return LeaderAndIsrRequest(3000, 1, -1, [LeaderAndIsrTopicState("t", TOPIC_ID, states)],
                               [LiveLeader(OTHER, "127.0.0.1", 9092)])


@pytest.fixture
async def replicas(dirs, disk):
    """t-0 led here and t-2 followed here in the healthy dir; t-1 led and t-3 followed in the failing one."""
    manager = ReplicaManager(LOCAL, log_manager(dirs, disk), CONFIG, 1, clock_ms=lambda: 1_000,
                             replica_lag_time_max_ms=10_000, fetch_purgatory_size=10, produce_purgatory_size=10,
                             fetcher_manager=RecordingFetchers(), alter_isr=lambda partition, change: None)
    request = leader_and_isr((0, LOCAL), (1, LOCAL), (2, OTHER), (3, OTHER))
    error, errors = await manager.become_leader_or_follower(request)
    assert error == ErrorCode.none and set(errors.values()) == {ErrorCode.none}
    assert [manager.log_manager.dir_of("t", p) for p in range(4)] == [dirs[0], dirs[1], dirs[0], dirs[1]]
    assert {tp.partition for tp in manager.fetcher_manager.followed} == {2, 3}
    return manager


def read(manager: ReplicaManager, partition: int):
    return manager.read_partition("t", partition, 0, current_leader_epoch=-1, last_fetched_epoch=-1,
                                  max_bytes=1 << 20, fetcher=CONSUMER, min_one_batch=True)


async def test_an_append_failure_takes_every_partition_of_the_dir_offline(replicas, disk, dirs):
    parked_result = replicas.append_to_partition("t", 1, batch(), -1)
    assert parked_result.error_code == ErrorCode.none
    parked = DelayedProduce(replicas, PARKED_MS, {("t", 1): parked_result}, {("t", 1): parked_result})
    assert not replicas.produce_purgatory.try_complete_else_watch(parked, [("t", 1)])

    disk.failing_dir = str(dirs[1])
    result = replicas.append_to_partition("t", 1, batch(), 1)
    assert result.error_code == ErrorCode.kafka_storage_error

    # The parked acks=all produce is answered at once, the dir's follower stopped fetching...
    assert parked.future.result()[("t", 1)].error_code == ErrorCode.kafka_storage_error
    assert {tp.partition for tp in replicas.fetcher_manager.followed} == {2}
    # ...and both of the dir's partitions answer KAFKA_STORAGE_ERROR from now on, with the disk healthy again.
    disk.failing_dir = None
    for p in (1, 3):
        assert replicas.append_to_partition("t", p, batch(), 1).error_code == ErrorCode.kafka_storage_error
        assert read(replicas, p).error_code == ErrorCode.kafka_storage_error
    # The other dir's partitions carry on.
    assert replicas.append_to_partition("t", 0, batch(), 1).error_code == ErrorCode.none
    assert read(replicas, 0).error_code == ErrorCode.none


async def test_offline_partitions_refuse_leader_and_isr_and_stop_replica(replicas, disk, dirs):
    replicas.log_manager.failure_channel.report(dirs[1], OSError(errno.EIO, "injected"))
    # Newer epochs change nothing: the controller learns from the answer that these replicas are offline.
    error, errors = await replicas.become_leader_or_follower(
        leader_and_isr((0, OTHER), (1, OTHER), (3, LOCAL), leader_epoch=2))
    assert error == ErrorCode.none
    assert errors == {(TOPIC_ID, 0): ErrorCode.none, (TOPIC_ID, 1): ErrorCode.kafka_storage_error,
                      (TOPIC_ID, 3): ErrorCode.kafka_storage_error}
    assert not replicas.get_partition("t", 3).is_leader
    assert {tp.partition for tp in replicas.fetcher_manager.followed} == {0, 2}
    stop = StopReplicaRequest(3000, 1, -1, [StopReplicaTopicState("t", [
        StopReplicaPartitionState(p, 3, True) for p in (1, 2)])])
    error, errors = await replicas.stop_replicas(stop)
    assert {tp.partition: e for tp, e in errors.items()} == {1: ErrorCode.kafka_storage_error, 2: ErrorCode.none}
    assert dirs[1].joinpath("t-1").is_dir()  # an offline dir's files are not touched


async def test_a_failed_epoch_checkpoint_write_takes_the_dir_offline(replicas, dirs):
    # The leader-epoch checkpoint is written by the partition, outside PartitionLog's own I/O guard.
    epoch_file = dirs[1] / "t-3" / "leader-epoch-checkpoint"
    epoch_file.unlink(missing_ok=True)
    epoch_file.mkdir()
    (epoch_file / "occupied").touch()
    error, errors = await replicas.become_leader_or_follower(leader_and_isr((3, LOCAL), leader_epoch=2))
    assert errors == {(TOPIC_ID, 3): ErrorCode.kafka_storage_error}
    assert replicas.log_manager.failure_channel.offline_dirs == [dirs[1]]
    assert replicas.get_partition("t", 1).storage_failed
