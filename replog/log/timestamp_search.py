"""Finding offsets by timestamp (ListOffsets): the segments' time indexes narrow the search, then a
header scan and one decoded batch give the exact record (Kafka's UnifiedLog.fetchOffsetByTimestamp)."""

from __future__ import annotations

from collections.abc import Iterable

from replog.log.segment import LogSegment
from replog.protocol.records import decode_records


def offset_for_timestamp(
    segments: Iterable[LogSegment], log_start_offset: int, timestamp: int
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record at or after the log start with timestamp >= `timestamp`."""
    assert timestamp >= 0
    for segment in segments:
        if segment.max_timestamp_so_far >= timestamp:
            found = _find_in_segment(segment, log_start_offset, timestamp)
            if found is not None:
                return found
    return None


def offset_of_max_timestamp(segments: Iterable[LogSegment], log_start_offset: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record carrying the largest timestamp (KIP-734)."""
    best: LogSegment | None = None
    for segment in segments:
        if segment.max_timestamp_so_far < 0:
            continue
        if best is None or segment.max_timestamp_so_far > best.max_timestamp_so_far:
            best = segment
    if best is None:
        return None
    return _find_in_segment(best, log_start_offset, best.max_timestamp_so_far)


def _find_in_segment(segment: LogSegment, log_start_offset: int, timestamp: int) -> tuple[int, int] | None:
    # Entries with a timestamp strictly below the target bound every record
    # before their offset, so the scan can start there.
    _, indexed_offset = segment.time_index.lookup(timestamp - 1)
    start_offset = max(indexed_offset, log_start_offset)
    for position, header in segment.scan_headers_from(start_offset):
        if header.max_timestamp < timestamp or header.last_offset < start_offset:
            continue
        for record in decode_records(segment.read_batch(position, header)):
            if record.timestamp >= timestamp and record.offset >= start_offset:
                return record.offset, record.timestamp
    return None
