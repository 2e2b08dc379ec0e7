"""LogSegments: the sorted map of a partition's segments, its lookups and its byte counts (no I/O of its own)."""

import pytest

from replog.log.log_segments import LogSegments
from replog.log.offset_metadata import LogOffsetMetadata
from replog.log.segment import LogSegment
from replog.protocol.records import build_batch, iter_batches

BATCHES_PER_SEGMENT = 2


def _segment_with_batches(tmp_path, base_offset: int) -> tuple[LogSegment, int]:
    """A segment holding BATCHES_PER_SEGMENT one-record batches from base_offset; (segment, one batch's size)."""
    segment = LogSegment(tmp_path, base_offset, index_interval_bytes=4096, max_index_bytes=4096, created_ms=0)
    for offset in range(base_offset, base_offset + BATCHES_PER_SEGMENT):
        data = bytearray(build_batch([(None, b"v" * 50, [], 1000)], base_offset=offset))
        [batch] = iter_batches(data)
        segment.append(batch.last_offset, memoryview(data), batch.max_timestamp, batch.last_offset)
    return segment, batch.size_in_bytes


@pytest.fixture
def segments(tmp_path) -> tuple[LogSegments, int]:
    """Segments at bases 0, 10 and 20, each with two batches; (segments, one batch's size)."""
    segments = LogSegments()
    for base in (0, 10, 20):
        segment, batch_size = _segment_with_batches(tmp_path, base)
        segments.add(segment)
    return segments, batch_size


def _bases(found) -> list[int]:
    return [segment.base_offset for segment in found]


@pytest.mark.parametrize(("offset", "floor_base"), [(0, 0), (9, 0), (10, 10), (25, 20), (1000, 20)])
def test_floor_is_the_segment_that_would_hold_the_offset(segments, offset, floor_base):
    found, _ = segments
    assert found.floor(offset).base_offset == floor_base


def test_floor_below_the_first_segment_is_none(tmp_path):
    segments = LogSegments()
    segments.add(_segment_with_batches(tmp_path, 5)[0])
    assert segments.floor(4) is None
    assert _bases(segments.from_offset(4)) == [5]  # from the first one, as a read below the log start does


def test_higher_and_from_offset_list_segments_in_order(segments):
    found, _ = segments
    assert _bases(found.higher(0)) == [10, 20]
    assert _bases(found.higher(10)) == [20]
    assert _bases(found.higher(20)) == []
    assert _bases(found.from_offset(15)) == [10, 20]
    assert _bases(found.from_offset(0)) == [0, 10, 20]


def test_first_active_and_positional_values(segments):
    found, _ = segments
    assert (found.first.base_offset, found.active.base_offset) == (0, 20)
    assert (found.values()[0].base_offset, found.values()[-1].base_offset) == (0, 20)
    assert len(found) == 3
    assert _bases(found) == [0, 10, 20]


def test_bytes_from_counts_the_rest_of_its_segment_and_every_later_one(segments):
    found, batch_size = segments
    assert found.size_in_bytes == 6 * batch_size
    assert found.bytes_from(LogOffsetMetadata(0, 0, 0)) == 6 * batch_size
    assert found.bytes_from(LogOffsetMetadata(11, 10, batch_size)) == 3 * batch_size
    assert found.bytes_from(LogOffsetMetadata(22, 20, 2 * batch_size)) == 0


def test_bytes_from_a_removed_segment_is_none(segments):
    found, batch_size = segments
    found.remove(0).delete()
    assert found.bytes_from(LogOffsetMetadata(1, 0, batch_size)) is None
    assert found.first.base_offset == 10


def test_add_refuses_a_base_offset_at_or_below_the_active_segment(segments, tmp_path):
    found, _ = segments
    elsewhere = tmp_path / "elsewhere"  # the fixture's files stay untouched
    elsewhere.mkdir()
    for base in (20, 15):
        with pytest.raises(AssertionError):
            found.add(LogSegment(elsewhere, base, index_interval_bytes=4096, max_index_bytes=4096, created_ms=0))
    assert _bases(found) == [0, 10, 20]


def test_clear_leaves_no_segment(segments):
    found, _ = segments
    found.clear()
    assert len(found) == 0
    assert found.floor(10) is None


def test_offset_metadata_of_finds_the_batch_start_or_the_end_of_the_active_segment(segments):
    found, batch_size = segments
    assert found.offset_metadata_of(0) == LogOffsetMetadata(0, 0, 0)
    assert found.offset_metadata_of(11) == LogOffsetMetadata(11, 10, batch_size)
    assert found.offset_metadata_of(22) == LogOffsetMetadata(22, 20, 2 * batch_size)  # the offset after the last
