from replog.log.segment import LogSegment
from replog.log.segment_files import SegmentFileOps
from replog.protocol.records import build_batch, iter_batches


def _segment(tmp_path, base=0, interval=4096) -> LogSegment:
    return LogSegment(tmp_path, base, index_interval_bytes=interval, max_index_bytes=4096, created_ms=0)


def _append(segment, base_offset, count=1, value=b"v" * 50, ts=None):
    ts = base_offset if ts is None else ts
    data = bytearray(build_batch([(None, value, [], ts)] * count, base_offset=base_offset))
    [batch] = iter_batches(data)
    segment.append(batch.last_offset, memoryview(data), batch.max_timestamp, batch.last_offset)
    return batch.size_in_bytes


def test_file_names(tmp_path):
    segment = _segment(tmp_path, base=42, interval=0)
    # The indexes of a new, empty segment are created by their first entry (as Kafka's LazyIndex): the
    # first batch gets none, the second one (index_interval_bytes after it) does.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00000000000000000042.log"]
    assert segment.size == 0
    assert segment.next_offset == 42
    _append(segment, 42)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00000000000000000042.log"]
    _append(segment, 43)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000042.index",
        "00000000000000000042.log",
        "00000000000000000042.timeindex",
    ]


def test_append_read_translate(tmp_path):
    segment = _segment(tmp_path, base=10)
    sizes = [_append(segment, 10 + 3 * i, count=3) for i in range(5)]
    assert segment.next_offset == 25
    assert segment.size == sum(sizes)
    location = segment.translate_offset(17)
    assert (location.base_offset, location.last_offset, location.position) == (16, 18, 2 * sizes[0])
    assert segment.translate_offset(25) is None
    whole = segment.read(10, 1 << 20)
    assert whole.position == 0
    assert whole.length == segment.size
    two = segment.read(14, 2 * sizes[0] + 5)
    assert [b.base_offset for b in iter_batches(two.read_bytes())] == [13, 16]
    one = segment.read(14, 1)  # min_one_batch
    assert [b.base_offset for b in iter_batches(one.read_bytes())] == [13]
    assert segment.read(14, 1, min_one_batch=False) is None
    bounded = segment.read(10, 1 << 20, max_position=3 * sizes[0])
    assert [b.base_offset for b in iter_batches(bounded.read_bytes())] == [10, 13, 16]


def test_index_density(tmp_path):
    segment = _segment(tmp_path, interval=1000)
    size = sum(_append(segment, i) for i in range(200))
    entries = segment.offset_index.entries
    batch_size = size // 200
    expected = size // (1000 + batch_size)
    assert expected - 2 <= entries <= expected + 2
    for offset in range(200):
        indexed, position = segment.offset_index.lookup(offset)
        assert indexed <= offset or indexed == 0
        assert segment.translate_offset(offset).position == offset * batch_size
        assert position <= offset * batch_size


def test_truncate_and_reopen(tmp_path):
    segment = _segment(tmp_path, interval=100)
    batch_size = _append(segment, 0, count=2)
    for i in range(1, 30):
        _append(segment, 2 * i, count=2, ts=1000 + i)
    removed = segment.truncate_to(21)  # mid-batch: the whole batch 20-21 goes
    assert removed == 20 * batch_size
    assert segment.next_offset == 20
    assert segment.max_timestamp_so_far == 1009
    _append(segment, 20, count=2, ts=5000)
    segment.close()
    reopened = _segment(tmp_path, interval=100)
    assert not reopened.needs_recovery
    assert reopened.next_offset == 22
    assert reopened.max_timestamp_so_far == 5000
    assert reopened.size == 11 * batch_size


def test_should_roll(tmp_path):
    from replog.log.config import LogConfig

    segment = _segment(tmp_path)
    config = LogConfig(segment_bytes=1000, segment_ms=100)
    assert not segment.should_roll(5000, 10**9, config, max_offset=0)  # never roll an empty segment
    size = _append(segment, 0)
    assert not segment.should_roll(1000 - size, 50, config, max_offset=1)
    assert segment.should_roll(1001 - size, 50, config, max_offset=1)
    assert segment.should_roll(1, 101, config, max_offset=1)
    assert segment.should_roll(1, 50, config, max_offset=2**31)


def test_deleted_segment_slice_still_readable(tmp_path):
    segment = _segment(tmp_path)
    _append(segment, 0)
    file_slice = segment.read(0, 1 << 20)
    segment.delete()
    assert not (tmp_path / "00000000000000000000.log").exists()
    assert [b.base_offset for b in iter_batches(file_slice.read_bytes())] == [0]


class CountingWrites(SegmentFileOps):
    def __init__(self) -> None:
        self.writes = 0

    def write(self, fd: int, data: memoryview) -> int:
        self.writes += 1
        return super().write(fd, data)


def test_an_append_of_several_batches_is_one_write(tmp_path):
    ops = CountingWrites()
    segment = LogSegment(tmp_path, 0, index_interval_bytes=0, max_index_bytes=4096, created_ms=0, file_ops=ops)
    data = bytearray(b"".join(build_batch([(None, b"v" * 50, [], 0)] * 2, base_offset=offset) for offset in (0, 2, 4)))
    segment.append(5, memoryview(data), 0, 5)
    assert ops.writes == 1
    assert segment.read(0, 1 << 20).read_bytes() == bytes(data)


class CountingReads(SegmentFileOps):
    def __init__(self) -> None:
        self.preads = 0

    def pread(self, fd: int, size: int, position: int) -> bytes:
        self.preads += 1
        return super().pread(fd, size, position)


def _counted_segment(tmp_path, batches: int) -> tuple[LogSegment, CountingReads, list[int]]:
    """A segment indexing every batch (interval 0) holding `batches` batches of 2 records from offset 0."""
    ops = CountingReads()
    segment = LogSegment(tmp_path, 0, index_interval_bytes=0, max_index_bytes=4096, created_ms=0, file_ops=ops)
    sizes = [_append(segment, 2 * i, count=2) for i in range(batches)]
    return segment, ops, sizes


def test_a_read_from_the_last_appended_batch_reads_nothing_back_from_the_file(tmp_path):
    """A follower fetches from where the leader's latest append began: that batch's place is known."""
    segment, ops, sizes = _counted_segment(tmp_path, 5)
    location = segment.translate_offset(9)
    assert (location.base_offset, location.last_offset, location.position, location.size) == (8, 9, 4 * sizes[0], sizes[4])
    tail = segment.read(8, 1 << 20)
    assert ops.preads == 0
    assert (tail.position, tail.length) == (4 * sizes[0], sizes[4])
    assert [b.base_offset for b in iter_batches(tail.read_bytes())] == [8]
    assert segment.read(8, 1, min_one_batch=False) is None
    assert segment.read(8, 1 << 20, max_position=segment.size - 1) is None
    assert segment.translate_offset(10) is None


def test_a_read_preads_only_the_headers_of_the_batches_after_its_first(tmp_path):
    segment, ops, sizes = _counted_segment(tmp_path, 5)
    segment.translate_offset(2)
    to_find_the_first = ops.preads  # the headers from the index entry's position to batch 2-3
    ops.preads = 0
    whole_from_second = segment.read(2, 1 << 20)
    assert ops.preads == to_find_the_first + 3  # then the three batches after it, not batch 2-3 again
    assert [b.base_offset for b in iter_batches(whole_from_second.read_bytes())] == [2, 4, 6, 8]
    ops.preads = 0
    two = segment.read(2, 2 * sizes[0])
    assert ops.preads == to_find_the_first + 2  # the third batch's header is read to find it does not fit
    assert [b.base_offset for b in iter_batches(two.read_bytes())] == [2, 4]


def test_a_truncated_tail_is_forgotten(tmp_path):
    segment, ops, sizes = _counted_segment(tmp_path, 3)
    segment.truncate_to(4)
    assert segment.translate_offset(4) is None
    assert segment.read(4, 1 << 20) is None
    bigger = _append(segment, 4, count=3, value=b"w" * 80)
    assert bigger != sizes[2]
    tail = segment.read(4, 1 << 20)
    assert [(b.base_offset, b.last_offset) for b in iter_batches(tail.read_bytes())] == [(4, 6)]
    assert segment.read(0, 1 << 20).length == 2 * sizes[0] + bigger
