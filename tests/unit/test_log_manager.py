import os
import uuid

import pytest

from replog.log.checkpoint import OffsetCheckpointFile
from replog.log.config import LogConfig
from replog.log.dir_lock import DirectoryInUseError
from replog.log.errors import StorageError
from replog.log.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    LogManager,
)
from replog.log.partition_log import TopicPartition
from replog.protocol.records import build_batch

CONFIG = LogConfig(segment_bytes=400, segment_index_bytes=4096)


def _batch(i=0) -> memoryview:
    return memoryview(bytearray(build_batch([(None, b"m%d" % i, [], 1000 + i)] * 2)))


def _manager(dirs) -> LogManager:
    return LogManager(dirs, CONFIG, clock_ms=lambda: 10_000)


def _flushed_log(manager: LogManager):
    """Partition t-0 with ten batches of two records, flushed: offsets 0..19."""
    log = manager.get_or_create_log("t", 0, CONFIG)
    for i in range(10):
        log.append_as_leader(_batch(i), leader_epoch=0)
    log.flush()
    return log


def test_create_spread_and_restart(tmp_path):
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = _manager(dirs)
    topic_id = uuid.uuid4()
    logs = [manager.get_or_create_log("orders", p, CONFIG, topic_id) for p in range(4)]
    assert sorted(log.directory.parent.name for log in logs) == ["d1", "d1", "d2", "d2"]
    assert manager.get_or_create_log("orders", 0, CONFIG) is logs[0]
    for i in range(10):
        logs[0].append_as_leader(_batch(i), leader_epoch=0)
    logs[0].maybe_increment_high_watermark(16)
    manager.shutdown()
    assert all((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)
    assert (logs[0].directory.parent / "replication-offset-checkpoint").read_text().startswith("0\n2\n")

    restarted = _manager(dirs)
    assert not any((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)
    log = restarted.get_log("orders", 0)
    assert (log.log_end_offset, log.high_watermark, log.recovery_point) == (20, 16, 20)
    assert log.topic_id == topic_id
    assert len(restarted.all_logs()) == 4


def test_crash_is_recovered_from_checkpointed_recovery_point(tmp_path):
    manager = _manager([tmp_path])
    log = _flushed_log(manager)
    manager.checkpoint_recovery_points()
    manager.checkpoint_high_watermarks()
    active = log.segments[-1]
    with open(active.log_path, "ab") as f:
        f.write(b"\x01" * 30)  # torn write, never flushed; no clean marker
    manager.release_locks()  # the process died: the kernel dropped its flock
    crashed = _manager([tmp_path])
    recovered = crashed.get_log("t", 0)
    assert recovered.log_end_offset == 20
    assert recovered.segments[-1].size == active.log_path.stat().st_size


@pytest.mark.parametrize("torn_name", [RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT])
def test_a_torn_checkpoint_is_rewritten_while_the_logs_load(tmp_path, torn_name):
    manager = _manager([tmp_path])
    _flushed_log(manager)
    manager.checkpoint_recovery_points()
    manager.checkpoint_log_start_offsets()
    (tmp_path / torn_name).write_bytes(b"0\n1\ncra" + b"\x00" * 8)  # a crash tore the rewrite
    manager.release_locks()

    restarted = _manager([tmp_path])
    recovered = restarted.get_log("t", 0)
    assert recovered.log_end_offset == 20
    # Readable again before any periodic checkpoint, with what the loaded log says.
    expected = recovered.recovery_point if torn_name == RECOVERY_POINT_CHECKPOINT else recovered.log_start_offset
    assert OffsetCheckpointFile(tmp_path / torn_name).read() == {("t", 0): expected}


def test_log_start_offset_checkpoint_and_retention(tmp_path):
    manager = _manager([tmp_path])
    log = manager.get_or_create_log("t", 0, LogConfig(segment_bytes=400, retention_ms=1))
    for i in range(20):
        log.append_as_leader(_batch(i), leader_epoch=0)
    log.maybe_increment_high_watermark(40)
    assert manager.cleanup_retention() > 0
    start = log.log_start_offset
    assert start > 0
    manager.shutdown()
    assert _manager([tmp_path]).get_log("t", 0).log_start_offset == start


def test_delete_log(tmp_path):
    manager = _manager([tmp_path])
    log = manager.get_or_create_log("gone", 0, CONFIG)
    directory = log.directory
    assert manager.delete_log("gone", 0)
    assert not directory.exists()
    assert manager.get_log("gone", 0) is None
    assert not manager.delete_log("gone", 0)


def test_new_logs_go_to_the_dir_with_fewest_logs_counting_loaded_planned_and_deleted(tmp_path):
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = _manager(dirs)
    for p in range(3):
        manager.get_or_create_log("old", p, CONFIG)  # d1, d2, d1
    manager.shutdown()
    restarted = _manager(dirs)
    assert restarted.delete_log("old", 0)  # d1 and d2 now hold one log each
    planned = restarted.plan_new_logs(
        [(TopicPartition("new", p), CONFIG, None) for p in range(4)])
    assert [new.directory.parent.name for new in planned] == ["d1", "d2", "d1", "d2"]
    for new in planned:
        restarted.adopt_new_log(new, restarted.open_new_log(new))
    assert restarted.get_log("new", 3).directory == dirs[1] / "new-3"
    assert restarted.get_or_create_log("new", 4, CONFIG).directory.parent == dirs[0]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_adopting_a_log_twice_is_refused_and_closes_the_second(tmp_path):
    manager = _manager([tmp_path])
    new = manager.plan_new_logs([(TopicPartition("t", 0), CONFIG, None)])[0]
    first = manager.open_new_log(new)
    manager.adopt_new_log(new, first)
    fds_before = _open_fds()
    second = manager.open_new_log(new)
    assert _open_fds() > fds_before
    with pytest.raises(StorageError, match="created twice"):
        manager.adopt_new_log(new, second)
    assert manager.get_log("t", 0) is first
    assert _open_fds() == fds_before


def test_second_manager_on_a_locked_dir_refuses_naming_dir_and_holder(tmp_path):
    first = _manager([tmp_path / "a", tmp_path / "b"])
    with pytest.raises(DirectoryInUseError, match=rf"{tmp_path / 'b'} is in use by another process \(pid {os.getpid()}\)"):
        _manager([tmp_path / "c", tmp_path / "b"])
    second_c = _manager([tmp_path / "c"])  # the refused start released the lock it had taken on c
    second_c.shutdown()
    first.shutdown()
    _manager([tmp_path / "a", tmp_path / "b"]).shutdown()  # a clean shutdown released a and b


def test_checkpoint_is_rewritten_only_when_an_offset_changed(tmp_path):
    manager = _manager([tmp_path])
    log = manager.get_or_create_log("t", 0, CONFIG)
    for i in range(3):
        log.append_as_leader(_batch(i), leader_epoch=0)
    checkpoint = tmp_path / "replication-offset-checkpoint"
    manager.checkpoint_high_watermarks()
    written = checkpoint.stat().st_ino  # each write renames a new file into place
    manager.checkpoint_high_watermarks()
    assert checkpoint.stat().st_ino == written
    log.maybe_increment_high_watermark(4)
    manager.checkpoint_high_watermarks()
    assert checkpoint.stat().st_ino != written
    assert checkpoint.read_text().splitlines()[2:] == ["t 0 4"]
    manager.release_locks()
