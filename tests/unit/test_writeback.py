"""Early writeback (log/writeback.py): which ranges a segment hands to sync_file_range, and when it stops."""

import errno
import os
import sys

import pytest

from replog.broker.config import config_from_properties, load_config
from replog.log.config import LogConfig
from replog.log.partition_log import PartitionLog
from replog.log.segment import LogSegment
from replog.log.segment_files import SegmentFileOps
from replog.log.writeback import PAGE_BYTES, SegmentWriteback, start_writeback
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
    assert config_from_properties({}).log_config().writeback_interval_bytes == 1 << 20  # 1 MiB unless set
    assert config_from_properties({"log.writeback.interval.bytes": "0"}).log_config().writeback_interval_bytes == 0
    config = config_from_properties({"log.writeback.interval.bytes": "4194304"})
    assert config.log_config().writeback_interval_bytes == 4 << 20
    with pytest.raises(ValueError, match="log.writeback.interval.bytes"):
        load_config(None, ["log.writeback.interval.bytes=-1"])
