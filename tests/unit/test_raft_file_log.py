"""FileRaftLog: what a controller's metadata log keeps across restarts, torn tails and snapshots."""

import os

import pytest

from replog.raft.file_log import LOG_FILE, CorruptRaftLogError, FileRaftLog
from replog.raft.messages import LogEntry, OffsetAndEpoch


def _entries(epochs: list[int]) -> list[LogEntry]:
    return [LogEntry(epoch, b"value-%d" % i, control=(i == 0)) for i, epoch in enumerate(epochs)]


def _written(directory, epochs) -> FileRaftLog:
    log = FileRaftLog(directory)
    log.append(_entries(epochs))
    log.flush()
    return log


def test_a_new_log_is_empty(tmp_path):
    log = FileRaftLog(tmp_path)
    assert (log.start_offset, log.end_offset, log.latest_snapshot_id()) == (0, 0, None)
    assert log.last_offset_and_epoch() == OffsetAndEpoch(0, 0)


def test_entries_and_epochs_survive_a_reopen(tmp_path):
    _written(tmp_path, [1, 1, 2, 4])
    reopened = FileRaftLog(tmp_path)
    assert reopened.read(0, 10) == tuple(_entries([1, 1, 2, 4]))
    assert reopened.end_offset_for_epoch(3) == OffsetAndEpoch(3, 2)
    assert reopened.flushed_end_offset == 4


def test_what_a_crashed_process_left_unflushed_is_fsynced_before_it_counts_as_flushed(tmp_path, monkeypatch):
    log = FileRaftLog(tmp_path)
    log.append(_entries([1, 1]))  # written, never fsynced: in the page cache when the process dies
    fsynced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsynced.append(os.readlink(f"/proc/self/fd/{fd}")), real_fsync(fd)))
    reopened = FileRaftLog(tmp_path)
    assert reopened.flushed_end_offset == 2
    assert str(tmp_path / LOG_FILE) in fsynced


def test_flush_makes_the_appended_tail_durable(tmp_path):
    log = FileRaftLog(tmp_path)
    log.append(_entries([1, 1]))
    assert log.flushed_end_offset == 0
    log.flush()
    assert log.flushed_end_offset == 2


@pytest.mark.parametrize("cut", [1, 5, 9])
def test_a_torn_tail_is_truncated_to_the_last_whole_entry(tmp_path, cut):
    _written(tmp_path, [1, 1, 2])
    path = tmp_path / LOG_FILE
    data = path.read_bytes()
    path.write_bytes(data[:-cut])
    reopened = FileRaftLog(tmp_path)
    assert reopened.end_offset == 2
    assert path.stat().st_size < len(data) - cut + 1  # the torn bytes are gone from the file too
    reopened.append(_entries([3]))
    reopened.flush()
    assert FileRaftLog(tmp_path).read(2, 1) == (LogEntry(3, b"value-0", control=True),)


def test_a_corrupt_entry_ends_the_log_there(tmp_path):
    _written(tmp_path, [1, 1, 1])
    path = tmp_path / LOG_FILE
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # inside the last entry's value: its CRC no longer matches
    path.write_bytes(bytes(data))
    assert FileRaftLog(tmp_path).end_offset == 2


def test_a_file_that_is_not_a_metadata_log_is_refused_by_name(tmp_path):
    (tmp_path / LOG_FILE).write_bytes(b"garbage that is no header")
    with pytest.raises(CorruptRaftLogError, match=str(tmp_path / LOG_FILE)):
        FileRaftLog(tmp_path)


def test_truncation_is_durable(tmp_path):
    log = _written(tmp_path, [1, 1, 2, 2])
    log.truncate_to(2)
    assert log.last_offset_and_epoch() == OffsetAndEpoch(2, 1)
    log.append([LogEntry(3, b"new")])
    log.flush()
    reopened = FileRaftLog(tmp_path)
    assert [e.epoch for e in reopened.read(0, 10)] == [1, 1, 3]


def test_a_snapshot_trims_the_log_and_survives_a_reopen(tmp_path):
    log = _written(tmp_path, [1, 1, 2, 2, 2])
    log.create_snapshot(OffsetAndEpoch(3, 2), b"state at 3")
    assert (log.start_offset, log.end_offset) == (3, 5)
    reopened = FileRaftLog(tmp_path)
    assert reopened.latest_snapshot_id() == OffsetAndEpoch(3, 2)
    assert reopened.read_snapshot(OffsetAndEpoch(3, 2)) == b"state at 3"
    assert (reopened.start_offset, reopened.end_offset) == (3, 5)
    assert reopened.read(3, 10) == tuple(_entries([1, 1, 2, 2, 2])[3:])
    assert reopened.last_offset_and_epoch() == OffsetAndEpoch(5, 2)


def test_a_newer_snapshot_replaces_the_older_one(tmp_path):
    log = _written(tmp_path, [1, 1, 2, 2, 2])
    log.create_snapshot(OffsetAndEpoch(2, 1), b"at 2")
    log.create_snapshot(OffsetAndEpoch(4, 2), b"at 4")
    assert sorted(p.name for p in tmp_path.glob("*.checkpoint")) == [f"{4:020d}-{2:010d}.checkpoint"]


def test_an_installed_snapshot_replaces_the_whole_log(tmp_path):
    log = _written(tmp_path, [1, 1])
    log.install_snapshot(OffsetAndEpoch(10, 5), b"leader's state")
    reopened = FileRaftLog(tmp_path)
    assert (reopened.start_offset, reopened.end_offset) == (10, 10)
    assert reopened.last_offset_and_epoch() == OffsetAndEpoch(10, 5)
    assert reopened.read_snapshot(OffsetAndEpoch(10, 5)) == b"leader's state"


def test_a_crash_after_the_snapshot_before_the_trim_is_finished_on_open(tmp_path):
    log = _written(tmp_path, [1, 1, 2, 2])
    log._write_snapshot(OffsetAndEpoch(3, 2), b"at 3")  # the crash comes before _trim_to
    reopened = FileRaftLog(tmp_path)
    assert (reopened.start_offset, reopened.end_offset) == (3, 4)
