"""A follower append whose write runs in a writer thread (replog/log/follower_append.py): unseen until
published, published whole or not at all, one write per append, and settled before any other change of
the log (a truncation, another append, a removal) so that per partition the order stays the leader's."""

from __future__ import annotations

import errno
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from replog.log.dir_failure import LogDirFailureChannel
from replog.log.errors import StorageError
from replog.log.partition_log import PartitionLog
from replog.log.segment import SegmentFileOps

from .fetcher_fake_leader import SMALL, batch, batches_of, clock_ms

TIMEOUT_S = 10.0


class WriterThreadDisk(SegmentFileOps):
    """Counts writes and the threads they run in; a write can be held at a gate, or take part of its bytes
    and then fail as a full disk does."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, int]] = []  # (thread name, bytes asked)
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.fail_after_bytes: int | None = None

    def write(self, fd, data):
        self.writes.append((threading.current_thread().name, len(data)))
        self.entered.set()
        assert self.gate.wait(TIMEOUT_S), "the test never opened the gate"
        if self.fail_after_bytes == 0:
            raise OSError(errno.ENOSPC, "injected: disk full")
        if self.fail_after_bytes is not None:  # a short write, as a nearly full disk takes; the next one fails
            taken, self.fail_after_bytes = super().write(fd, data[: self.fail_after_bytes]), 0
            return taken
        return super().write(fd, data)


@pytest.fixture
def disk():
    return WriterThreadDisk()


@pytest.fixture
def writer():
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="test-writer")
    yield executor
    executor.shutdown(wait=True)


def open_log(tmp_path, disk: SegmentFileOps) -> PartitionLog:
    return PartitionLog.open(tmp_path / "events-0", SMALL, clock_ms=clock_ms, clean_shutdown=True, file_ops=disk,
                             failure_channel=LogDirFailureChannel())


def leader_batch(base_offset: int, epoch: int = 3, count: int = 2) -> memoryview:
    return batch(count, base_offset=base_offset, epoch=epoch)


def test_an_append_is_written_once_in_the_writer_thread_and_seen_only_once_published(tmp_path, disk, writer):
    log = open_log(tmp_path, disk)
    disk.gate.clear()
    records = leader_batch(0)

    pending = log.begin_follower_append(records, writer)

    assert disk.entered.wait(TIMEOUT_S)
    # Written (or being written) past the log's end: no reader sees it yet.
    assert (log.log_end_offset, log.size_in_bytes, log.epoch_cache.latest_epoch) == (0, 0, -1)
    assert log.read(0, max_bytes=1 << 20, upper_bound=10).slice is None
    disk.gate.set()
    info = log.finish_follower_append(pending)

    assert disk.writes == [(disk.writes[0][0], len(records))]
    assert disk.writes[0][0].startswith("test-writer")
    assert (info.first_offset, info.last_offset, info.num_bytes) == (0, 1, len(records))
    assert (log.log_end_offset, log.size_in_bytes, log.epoch_cache.latest_epoch) == (2, len(records), 3)
    assert [bytes(b.buffer) for b in batches_of(log)] == [bytes(records)]


def test_a_failed_write_leaves_the_log_and_its_file_as_they_were(tmp_path, disk, writer):
    log = open_log(tmp_path, disk)
    first = log.finish_follower_append(log.begin_follower_append(leader_batch(0), writer))
    size_before = log.size_in_bytes
    disk.fail_after_bytes = 17  # part of the batch reaches the file, then the disk is full

    pending = log.begin_follower_append(leader_batch(2), writer)
    with pytest.raises(StorageError):
        log.finish_follower_append(pending)

    assert (first.last_offset, log.log_end_offset, log.size_in_bytes) == (1, 2, size_before)
    assert os.path.getsize(log.active_segment.log_path) == size_before  # the torn bytes were cut off
    assert log.is_offline  # the dir is reported, as for a write on the loop


def test_a_failed_write_settled_by_another_change_takes_the_dir_offline(tmp_path, disk, writer):
    log = open_log(tmp_path, disk)
    disk.fail_after_bytes = 0

    log.begin_follower_append(leader_batch(0), writer)
    log.settle_follower_append()  # as a removal does, without finishing the append

    assert log.is_offline
    assert (log.log_end_offset, os.path.getsize(log.active_segment.log_path)) == (0, 0)


def test_a_truncation_waits_for_the_write_in_flight_and_applies_after_it(tmp_path, disk, writer):
    log = open_log(tmp_path, disk)
    log.finish_follower_append(log.begin_follower_append(leader_batch(0), writer))
    disk.gate.clear()
    disk.entered.clear()
    pending = log.begin_follower_append(leader_batch(2), writer)
    assert disk.entered.wait(TIMEOUT_S)

    disk.gate.set()
    log.truncate_to(3)  # into the batch in flight: only right if that batch is in the log first

    assert log.log_end_offset == 2  # the straddling batch [2, 3] went whole, after it had been appended
    assert log.finish_follower_append(pending).last_offset == 3  # its append did happen, then was truncated


def test_appends_to_one_log_stay_in_the_leaders_order(tmp_path, disk, writer):
    log = open_log(tmp_path, disk)
    sent = [leader_batch(offset) for offset in range(0, 20, 2)]

    pending = [log.begin_follower_append(records, writer) for records in sent]  # each settles the one before
    infos = [log.finish_follower_append(append) for append in pending]

    assert [info.first_offset for info in infos] == list(range(0, 20, 2))
    assert [bytes(b.buffer) for b in batches_of(log)] == [bytes(records) for records in sent]
    assert len(disk.writes) == len(sent)  # one write per append
    assert log.log_end_offset == 20


def test_closing_the_log_publishes_the_append_in_flight(tmp_path, disk, writer):
    log = open_log(tmp_path, disk)
    log.begin_follower_append(leader_batch(0), writer)

    log.close()

    reopened = open_log(tmp_path, SegmentFileOps())
    assert reopened.log_end_offset == 2
