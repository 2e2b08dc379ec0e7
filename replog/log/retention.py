"""Which leading segments retention deletes (Kafka's UnifiedLog.deleteOldSegments and its three breach
rules): a pure decision over the segments' sizes and timestamps, so the log only deletes what it is given."""

from __future__ import annotations

from collections.abc import Sequence

from replog.log.config import LogConfig
from replog.log.segment import LogSegment


def segments_past_retention(
    segments: Sequence[LogSegment], *, now_ms: int, config: LogConfig, high_watermark: int, log_start_offset: int
) -> list[LogSegment]:
    """The leading segments past retention.ms or retention.bytes, or wholly below the log start offset;
    never the active one, nor any holding an offset at or above the HW (consumers may not have it yet).
    Time and size retention apply only with cleanup.policy delete (or compact,delete): a compacted-only log
    keeps its segments and loses only what lies below the log start offset (DeleteRecords)."""
    remaining_bytes = sum(segment.size for segment in segments)
    deletable = []
    for segment, following in zip(segments, segments[1:], strict=False):
        if following.base_offset > high_watermark:
            break
        expired = (config.delete and config.retention_ms >= 0
                   and now_ms - segment.max_timestamp_so_far > config.retention_ms)
        oversized = (config.delete and config.retention_bytes >= 0
                     and remaining_bytes - segment.size >= config.retention_bytes)
        below_start = following.base_offset <= log_start_offset
        if not (expired or oversized or below_start):
            break
        deletable.append(segment)
        remaining_bytes -= segment.size
    assert len(deletable) < len(segments) or not segments
    return deletable
