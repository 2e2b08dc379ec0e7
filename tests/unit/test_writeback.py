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
from replog.log.writeback import SegmentWriteback, start_writeback
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


@pytest.mark.parametrize(
    ("interval", "appends", "expected"),
    [
        (0, [(0, 10 * KIB)], []),  # off
        (4 * KIB, [(0, KIB), (KIB, 2 * KIB)], []),  # 2 KiB pending: under the interval
        (4 * KIB, [(0, 3 * KIB), (3 * KIB, 5 * KIB)], [(0, 5 * KIB)]),  # crosses it: everything pending
        (4 * KIB, [(0, 4 * KIB), (4 * KIB, 6 * KIB), (6 * KIB, 8 * KIB)], [(0, 4 * KIB), (4 * KIB, 4 * KIB)]),
        (4 * KIB, [(0, 9 * KIB)], [(0, 9 * KIB)]),  # one append larger than the interval: all of it at once
        # Truncated to 1 KiB after 4 KiB were handed over: what is pending starts again where the file now ends.
        (4 * KIB, [(0, 4 * KIB), (KIB, 5 * KIB)], [(0, 4 * KIB), (KIB, 4 * KIB)]),
    ],
)
def test_writeback_starts_every_interval_bytes_on_the_range_pending(interval, appends, expected):
    ops = RecordedWriteback()
    writeback = SegmentWriteback(interval, 0)
    for start, end in appends:
        writeback.after_append(ops, 3, start, end)
    assert ops.ranges == expected


@pytest.mark.parametrize("error", [errno.ENOSYS, errno.EINVAL, errno.ESPIPE, errno.EOPNOTSUPP])
def test_an_unsupported_writeback_is_not_asked_again(error):
    ops = RecordedWriteback(error)
    writeback = SegmentWriteback(KIB, 0)
    for offset in range(4):
        writeback.after_append(ops, 3, offset * KIB, (offset + 1) * KIB)
    assert ops.ranges == [(0, KIB)]
    assert not writeback.supported


def test_a_failed_writeback_goes_on_with_the_next_range():
    """EIO is the write's or the fsync's to report; the writeback only tried to help."""
    ops = RecordedWriteback(errno.EIO)
    writeback = SegmentWriteback(KIB, 0)
    writeback.after_append(ops, 3, 0, KIB)
    writeback.after_append(ops, 3, KIB, 2 * KIB)
    assert ops.ranges == [(0, KIB), (KIB, KIB)]


def test_a_segment_hands_every_appended_byte_to_writeback_once_in_order(tmp_path):
    ops = RecordedWriteback()
    segment = _segment(tmp_path, 16 * KIB, ops)
    for offset in range(40):
        segment.append(offset, _batch(offset, 3000), 0, offset)
    batch_bytes = segment.size // 40
    covered = 0
    for start, length in ops.ranges:
        assert start == covered and 16 * KIB <= length < 16 * KIB + batch_bytes
        covered += length
    assert len(ops.ranges) >= 6
    assert segment.size - covered < 16 * KIB  # what is left pending is under one interval


def test_a_reopened_segment_hands_over_only_what_it_appends(tmp_path):
    segment = _segment(tmp_path, 4 * KIB, SegmentFileOps())
    segment.append(0, _batch(0, 8 * KIB), 0, 0)
    size = segment.size
    segment.close()
    ops = RecordedWriteback()
    reopened = _segment(tmp_path, 4 * KIB, ops)
    reopened.append(1, _batch(1, 5 * KIB), 0, 1)
    assert ops.ranges == [(size, reopened.size - size)]


def test_a_log_takes_the_interval_from_its_config(tmp_path):
    ops = RecordedWriteback()
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(writeback_interval_bytes=4 * KIB), clock_ms=lambda: 0,
                            clean_shutdown=True, file_ops=ops)  # fmt: skip
    for _ in range(3):
        log.append_as_leader(memoryview(bytearray(build_batch([(None, b"v" * 3000, [], 0)]))), leader_epoch=0)
    assert [start for start, _ in ops.ranges] == [0]
    assert ops.ranges[0][1] >= 4 * KIB


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
    config = config_from_properties({"log.writeback.interval.bytes": "1048576"})
    assert config.log_config().writeback_interval_bytes == 1 << 20
    with pytest.raises(ValueError, match="log.writeback.interval.bytes"):
        load_config(None, ["log.writeback.interval.bytes=-1"])
