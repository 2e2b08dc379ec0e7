"""A segment allocates disk blocks past its file's end ahead of large appends (fallocate KEEP_SIZE) and
gives them back when it stops being active: the file's size is always exactly the bytes appended, small
appends never reserve, and a file system that cannot allocate ahead (or a full one) changes nothing else."""

from __future__ import annotations

import errno
import os

import pytest

from replog.log.append_reservation import LARGE_APPEND_BYTES, RESERVE_AHEAD_BYTES
from replog.log.segment import LogSegment
from replog.log.segment_files import SegmentFileOps
from replog.protocol.records import build_batch, iter_batches

VALUE_BYTES = 1_000_000  # one batch of about 1 MB: a follower's answer at replica.fetch.max.bytes


class AllocationLog(SegmentFileOps):
    """Records allocate_past_end and free_past_end calls; `refuse` makes allocation fail with that errno."""

    def __init__(self, refuse: int | None = None) -> None:
        self.allocations: list[tuple[int, int]] = []
        self.frees: list[int] = []
        self.refuse = refuse

    def allocate_past_end(self, fd: int, offset: int, length: int) -> None:
        self.allocations.append((offset, length))
        if self.refuse is not None:
            raise OSError(self.refuse, os.strerror(self.refuse))
        super().allocate_past_end(fd, offset, length)

    def free_past_end(self, fd: int, size: int) -> None:
        self.frees.append(size)
        super().free_past_end(fd, size)


def _segment(tmp_path, ops: SegmentFileOps) -> LogSegment:
    return LogSegment(tmp_path, 0, index_interval_bytes=4096, max_index_bytes=4096, created_ms=0, file_ops=ops)


def _append(segment: LogSegment, value_bytes: int) -> bytes:
    data = bytearray(build_batch([(None, b"v" * value_bytes, [], 1)], base_offset=segment.next_offset))
    [batch] = iter_batches(data)
    segment.append(batch.last_offset, memoryview(data), batch.max_timestamp, batch.last_offset)
    return bytes(data)


def _allocated_bytes(segment: LogSegment) -> int:
    return os.stat(segment.log_path).st_blocks * 512


def _skip_unless_allocation_works(tmp_path) -> None:
    probe = tmp_path / "probe"
    fd = os.open(probe, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        SegmentFileOps().allocate_past_end(fd, 0, 1 << 20)
    except OSError as exc:
        pytest.skip(f"the test directory's file system cannot allocate past a file's end: {exc!r}")
    finally:
        os.close(fd)
        probe.unlink()


def test_large_appends_write_into_blocks_allocated_ahead_and_the_size_stays_exact(tmp_path):
    _skip_unless_allocation_works(tmp_path)
    ops = AllocationLog()
    segment = _segment(tmp_path, ops)
    written = b""
    for _ in range(12):
        written += _append(segment, VALUE_BYTES)
        # Readers, recovery and sendfile go by the file's size: never a byte past what was appended.
        assert os.stat(segment.log_path).st_size == segment.size == len(written)
        assert _allocated_bytes(segment) >= segment.size
    # One allocation per RESERVE_AHEAD_BYTES, each from the size at that moment, not one per append.
    batch = len(written) // 12
    per_reservation = RESERVE_AHEAD_BYTES // batch
    assert ops.allocations == [(i * per_reservation * batch, RESERVE_AHEAD_BYTES) for i in range(3)]
    assert _allocated_bytes(segment) >= ops.allocations[-1][0] + RESERVE_AHEAD_BYTES
    assert segment.read(0, 1 << 30).read_bytes() == written


def test_sealing_gives_back_the_blocks_and_keeps_the_modification_time(tmp_path):
    _skip_unless_allocation_works(tmp_path)
    ops = AllocationLog()
    segment = _segment(tmp_path, ops)
    for _ in range(2):
        _append(segment, VALUE_BYTES)
    assert _allocated_bytes(segment) >= RESERVE_AHEAD_BYTES
    last_write_ns = 1_700_000_000_123_456_789
    os.utime(segment.log_path, ns=(last_write_ns, last_write_ns))
    segment.seal()  # a roll: the segment is no longer active
    assert ops.frees == [segment.size]
    assert _allocated_bytes(segment) < segment.size + 64 * 1024
    assert os.stat(segment.log_path).st_size == segment.size
    # The log cleaner's tombstone horizon reads the modification time as the last write.
    assert os.stat(segment.log_path).st_mtime_ns == last_write_ns
    segment.close()
    assert ops.frees == [segment.size]  # nothing left to give back


def test_small_appends_never_allocate_ahead(tmp_path):
    ops = AllocationLog()
    segment = _segment(tmp_path, ops)
    for _ in range(40):
        _append(segment, LARGE_APPEND_BYTES // 4)
    assert segment.size > LARGE_APPEND_BYTES * 8
    assert ops.allocations == []
    segment.close()
    assert ops.frees == []


def test_a_truncation_frees_the_reservation_and_the_next_large_append_allocates_again(tmp_path):
    _skip_unless_allocation_works(tmp_path)
    ops = AllocationLog()
    segment = _segment(tmp_path, ops)
    first = _append(segment, VALUE_BYTES)
    _append(segment, VALUE_BYTES)
    assert ops.allocations == [(0, RESERVE_AHEAD_BYTES)]
    segment.truncate_to(1)  # the second batch goes: the truncation frees everything past the new end
    assert _allocated_bytes(segment) < len(first) + 64 * 1024
    _append(segment, VALUE_BYTES)
    assert ops.allocations == [(0, RESERVE_AHEAD_BYTES), (len(first), RESERVE_AHEAD_BYTES)]
    segment.seal()
    assert ops.frees == [segment.size]


def test_a_file_system_without_allocation_is_asked_once_and_takes_every_append(tmp_path):
    ops = AllocationLog(refuse=errno.EOPNOTSUPP)
    segment = _segment(tmp_path, ops)
    written = b"".join(_append(segment, VALUE_BYTES) for _ in range(6))
    assert ops.allocations == [(0, RESERVE_AHEAD_BYTES)]
    assert segment.read(0, 1 << 30).read_bytes() == written
    segment.seal()
    assert ops.frees == []  # nothing was allocated


def test_a_full_disk_refusing_the_allocation_leaves_the_append_to_the_write(tmp_path):
    """ENOSPC from the allocation is not the append's error: the write decides (here it fits), and the next
    large append asks again."""
    ops = AllocationLog(refuse=errno.ENOSPC)
    segment = _segment(tmp_path, ops)
    sizes = [len(_append(segment, VALUE_BYTES)) for _ in range(3)]
    assert ops.allocations == [(0, RESERVE_AHEAD_BYTES), (sizes[0], RESERVE_AHEAD_BYTES),
                               (sizes[0] + sizes[1], RESERVE_AHEAD_BYTES)]  # fmt: skip
    assert segment.size == sum(sizes)


def test_sealing_leaves_a_file_longer_than_the_segment_knows_alone(tmp_path):
    """A torn write that could not be cut off (its directory goes offline) leaves bytes past the segment's
    size; giving back the reservation must not cut them: recovery at the next start decides."""
    _skip_unless_allocation_works(tmp_path)
    segment = _segment(tmp_path, AllocationLog())
    _append(segment, VALUE_BYTES)
    with open(segment.log_path, "ab") as file:
        file.write(b"torn")
    segment.seal()
    assert os.stat(segment.log_path).st_size == segment.size + 4
