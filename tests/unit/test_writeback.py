"""Early writeback (log/writeback.py): which ranges a segment hands to sync_file_range, and when it stops."""

import errno
import gc
import os
import sys
import threading

import pytest

from replog.broker.config import config_from_properties, load_config
from replog.log.config import LogConfig
from replog.log.partition_log import PartitionLog
from replog.log.segment import LogSegment
from replog.log.segment_files import SegmentFileOps
from replog.log.writeback import (
    BACKGROUND,
    PAGE_BYTES,
    BackgroundWriteback,
    SegmentWriteback,
    start_writeback,
)
from replog.protocol.records import build_batch

KIB = 1024


class RecordedWriteback(SegmentFileOps):
    """Records every writeback started; fails them with `error` when set."""

    def __init__(self, error: int | None = None) -> None:
        self.ranges: list[tuple[int, int]] = []
        self.error = error

    def start_writeback(self, fd: int, start: int, length: int) -> None:
        self.ranges.append((start, length))
        if self.error is not None:
            raise OSError(self.error, os.strerror(self.error))


def _batch(offset: int, value_bytes: int) -> memoryview:
    return memoryview(bytearray(build_batch([(None, b"v" * value_bytes, [], 0)], base_offset=offset)))


def _segment(tmp_path, interval: int, ops: SegmentFileOps) -> LogSegment:
    return LogSegment(tmp_path, 0, index_interval_bytes=4096, max_index_bytes=4096, created_ms=0,
                      writeback_interval_bytes=interval, file_ops=ops)  # fmt: skip


PAGE = PAGE_BYTES


@pytest.mark.parametrize(
    ("interval", "appends", "expected"),
    [
        (0, [(0, 10 * PAGE)], []),  # off
        (4 * PAGE, [(0, PAGE), (PAGE, 2 * PAGE)], []),  # 2 pages pending: under the interval
        (4 * PAGE, [(0, 3 * PAGE), (3 * PAGE, 5 * PAGE)], [(0, 5 * PAGE)]),  # crosses it: everything pending
        (4 * PAGE, [(0, 4 * PAGE), (4 * PAGE, 6 * PAGE), (6 * PAGE, 8 * PAGE)], [(0, 4 * PAGE), (4 * PAGE, 4 * PAGE)]),
        (4 * PAGE, [(0, 9 * PAGE)], [(0, 9 * PAGE)]),  # one append larger than the interval: all of it at once
        # The last page, partly written, stays pending: the next append writes into it again.
        (4 * PAGE, [(0, 4 * PAGE + 100)], [(0, 4 * PAGE)]),
        (4 * PAGE, [(0, 4 * PAGE - 100), (4 * PAGE - 100, 4 * PAGE + 100)], [(0, 4 * PAGE)]),
        (4 * PAGE, [(0, 4 * PAGE + 100), (4 * PAGE + 100, 8 * PAGE + 50)], [(0, 4 * PAGE), (4 * PAGE, 4 * PAGE)]),
        # Truncated into page 1 after 4 pages were handed over: pending starts again at that page.
        (4 * PAGE, [(0, 4 * PAGE), (PAGE + 10, 5 * PAGE + 10)], [(0, 4 * PAGE), (PAGE, 4 * PAGE)]),
    ],
)
def test_writeback_starts_every_interval_bytes_on_the_whole_pages_pending(interval, appends, expected):
    ops = RecordedWriteback()
    writeback = SegmentWriteback(interval, 0)
    for start, end in appends:
        writeback.after_append(ops, 3, start, end)
    assert ops.ranges == expected


@pytest.mark.parametrize("error", [errno.ENOSYS, errno.EINVAL, errno.ESPIPE, errno.EOPNOTSUPP])
def test_an_unsupported_writeback_is_not_asked_again(error):
    ops = RecordedWriteback(error)
    writeback = SegmentWriteback(PAGE, 0)
    for offset in range(4):
        writeback.after_append(ops, 3, offset * PAGE, (offset + 1) * PAGE)
    assert ops.ranges == [(0, PAGE)]
    assert not writeback.supported


def test_a_failed_writeback_goes_on_with_the_next_range():
    """EIO is the write's or the fsync's to report; the writeback only tried to help."""
    ops = RecordedWriteback(errno.EIO)
    writeback = SegmentWriteback(PAGE, 0)
    writeback.after_append(ops, 3, 0, PAGE)
    writeback.after_append(ops, 3, PAGE, 2 * PAGE)
    assert ops.ranges == [(0, PAGE), (PAGE, PAGE)]


def test_a_segment_hands_every_whole_page_it_appends_to_writeback_once_in_order(tmp_path):
    ops = RecordedWriteback()
    segment = _segment(tmp_path, 4 * PAGE, ops)
    for offset in range(40):
        segment.append(offset, _batch(offset, 3000), 0, offset)
    batch_bytes = segment.size // 40
    covered = 0
    for start, length in ops.ranges:
        assert start == covered and (start + length) % PAGE == 0
        assert 4 * PAGE <= length < 4 * PAGE + batch_bytes + PAGE
        covered += length
    assert len(ops.ranges) >= 6
    assert segment.size - covered < 4 * PAGE + PAGE  # what is left pending is under one interval and a page


def test_a_reopened_segment_hands_over_only_what_it_appends(tmp_path):
    segment = _segment(tmp_path, 4 * PAGE, SegmentFileOps())
    segment.append(0, _batch(0, 2 * PAGE + 100), 0, 0)
    size = segment.size
    segment.close()
    ops = RecordedWriteback()
    reopened = _segment(tmp_path, 4 * PAGE, ops)
    reopened.append(1, _batch(1, 5 * PAGE), 0, 1)
    assert ops.ranges == [(size, reopened.size - reopened.size % PAGE - size)]


def test_a_log_takes_the_interval_from_its_config(tmp_path):
    ops = RecordedWriteback()
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(writeback_interval_bytes=2 * PAGE), clock_ms=lambda: 0,
                            clean_shutdown=True, file_ops=ops)  # fmt: skip
    for _ in range(3):
        log.append_as_leader(memoryview(bytearray(build_batch([(None, b"v" * PAGE, [], 0)]))), leader_epoch=0)
    assert [start for start, _ in ops.ranges] == [0]
    assert ops.ranges[0][1] >= 2 * PAGE


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sync_file_range is Linux's")
def test_start_writeback_calls_sync_file_range_on_a_real_file(tmp_path):
    path = tmp_path / "data"
    with open(path, "wb") as file:
        file.write(b"x" * (64 * KIB))
        file.flush()
        start_writeback(file.fileno(), 0, 64 * KIB)  # returns without waiting; refused only where unsupported
    with pytest.raises(OSError) as failure:
        start_writeback(1_000_000, 0, KIB)  # not a descriptor
    assert failure.value.errno == errno.EBADF


def test_the_broker_property_sets_the_logs_interval_and_refuses_a_negative_one():
    assert config_from_properties({}).log_config().writeback_interval_bytes == 1 << 20  # on, every 1 MiB
    assert config_from_properties({"log.writeback.interval.bytes": "0"}).log_config().writeback_interval_bytes == 0
    assert config_from_properties({"log.writeback.interval.bytes": "1048576"}).log_config().writeback_interval_bytes == 1 << 20
    config = config_from_properties({"log.writeback.interval.bytes": "4194304"})
    assert config.log_config().writeback_interval_bytes == 4 << 20
    with pytest.raises(ValueError, match="log.writeback.interval.bytes"):
        load_config(None, ["log.writeback.interval.bytes=-1"])


def _open_fds() -> int:
    gc.collect()  # files earlier tests left to the collector
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_the_background_thread_makes_each_call_on_a_duplicate_of_the_segments_file(tmp_path):
    path = tmp_path / "segment"
    path.write_bytes(b"x" * 8192)
    calls = []
    background = BackgroundWriteback(lambda fd, start, length: calls.append((os.fstat(fd).st_ino, start, length)),
                                     available=True)  # fmt: skip
    before = _open_fds()
    fd = os.open(path, os.O_RDONLY)
    background.submit(fd, 0, 4096)
    os.close(fd)  # the segment closes before the thread gets to it: the duplicate still names its file
    background.submit(os.open(path, os.O_RDONLY), 4096, 4096)
    background.join()
    assert calls == [(path.stat().st_ino, 0, 4096), (path.stat().st_ino, 4096, 4096)]
    assert _open_fds() <= before + 1  # the duplicates are closed (the second open is the test's own)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_a_segment_deleted_while_its_writeback_waits_is_written_back_unlinked_then_let_go(tmp_path):
    """Retention or a replica deletion may unlink a segment whose range is still queued: the duplicate keeps
    the deleted file's inode for the call alone, and the thread closes it after, so its space is freed."""
    release = threading.Event()
    links = []

    def call(fd, start, length):
        release.wait(10)
        links.append(os.fstat(fd).st_nlink)

    background = BackgroundWriteback(call, available=True)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"x" * 8192)
    before = _open_fds()
    fd = os.open(path, os.O_RDONLY)
    background.submit(fd, 0, 4096)
    os.close(fd)
    path.unlink()
    release.set()
    background.join()
    assert links == [0]  # made on the deleted file, not on whatever reused the descriptor's number
    assert _open_fds() == before


def test_an_append_at_the_descriptor_limit_goes_on_when_the_duplicate_cannot_be_made(tmp_path):
    """os.dup fails with EMFILE when the process is at its file limit (the file budget leaves half of it to
    sockets): the append has succeeded all the same, and the next range is tried later."""
    ops = RecordedWriteback(errno.EMFILE)
    segment = _segment(tmp_path, PAGE, ops)
    segment.append(0, _batch(0, 2 * PAGE), 0, 0)
    segment.append(1, _batch(1, 2 * PAGE), 0, 0)
    assert segment.next_offset == 2  # both appends stand
    assert len(ops.ranges) == 2 and segment._writeback.supported


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_the_queue_is_bounded_and_a_call_over_it_is_dropped(tmp_path):
    release = threading.Event()
    background = BackgroundWriteback(lambda fd, start, length: release.wait(10), available=True)
    before = _open_fds()
    with open(tmp_path / "segment", "wb") as file:
        for _ in range(BackgroundWriteback.MAX_QUEUED + 3):  # one taken by the blocked thread, 64 queued
            background.submit(file.fileno(), 0, 4096)
        assert background.dropped >= 2
        release.set()
        background.join()
    assert _open_fds() == before


@pytest.mark.parametrize("error", [errno.ENOSYS, errno.EINVAL])
def test_a_call_refused_in_the_thread_turns_the_next_submits_into_errors(tmp_path, error):
    def refuse(fd, start, length):
        raise OSError(error, os.strerror(error))

    background = BackgroundWriteback(refuse, available=True)
    with open(tmp_path / "segment", "wb") as file:
        background.submit(file.fileno(), 0, 4096)
        background.join()
        with pytest.raises(OSError) as failure:
            background.submit(file.fileno(), 0, 4096)
    assert failure.value.errno == errno.ENOSYS


def test_where_the_call_is_missing_submit_fails_at_once_without_a_thread():
    background = BackgroundWriteback(available=False)
    with pytest.raises(OSError) as failure:
        background.submit(0, 0, 4096)
    assert failure.value.errno == errno.ENOSYS
    assert background._thread is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sync_file_range is Linux's")
def test_a_segments_writeback_reaches_the_real_call_through_the_background_thread(tmp_path):
    segment = _segment(tmp_path, PAGE, SegmentFileOps())
    segment.append(0, _batch(0, 4 * PAGE), 0, 0)
    BACKGROUND.join()
    assert not BACKGROUND.unsupported  # the call was made and accepted
    assert segment._writeback.pending_from == segment.size - segment.size % PAGE
