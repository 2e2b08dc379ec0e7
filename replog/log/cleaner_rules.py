"""The log cleaner's decisions, as pure functions over segment sizes, offsets and timestamps (Kafka's
LogCleanerManager.cleanableOffsets and grabFilthiestCompactedLog, Cleaner.groupSegmentsBySize and
shouldRetainRecord) and its bounded key -> offset map (Kafka's SkimpyOffsetMap).

Terms, as Kafka's: the *clean section* is what earlier cleanings left, from the log start to the *first dirty
offset* (the cleaner checkpoint); the *dirty section* runs from there to the *first uncleanable offset*, which
is never past the active segment, the high watermark, or the first segment younger than
min.compaction.lag.ms. Cleaning works on whole segments only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

INT32_MAX = (1 << 31) - 1
# Kafka's SkimpyOffsetMap: a 16-byte MD5 of the key and an 8-byte offset per entry, filled to 90%.
OFFSET_MAP_ENTRY_BYTES = 24
OFFSET_MAP_LOAD_FACTOR = 0.9


class SegmentStats(Protocol):
    """What the rules read of a segment (LogSegment has it all in memory)."""

    @property
    def base_offset(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def max_timestamp_so_far(self) -> int: ...


def first_dirty_offset(checkpoint: int | None, *, log_start_offset: int, log_end_offset: int) -> int:
    """Where the dirty section starts: the checkpoint, unless it is missing, below the log start (retention
    or DeleteRecords moved it) or past the log end (the log was truncated): then the log start."""
    if checkpoint is None or checkpoint < log_start_offset or checkpoint > log_end_offset:
        return log_start_offset
    return checkpoint


@dataclass(frozen=True, slots=True)
class CleanableRange:
    first_dirty: int
    # The first offset not cleaned this time: a segment base (or first_dirty when nothing is cleanable).
    end: int
    clean_bytes: int
    dirty_bytes: int
    # Segments below `end`, in order, with the offset after each (the next segment's base).
    segments: tuple[tuple[SegmentStats, int], ...]

    @property
    def dirty_ratio(self) -> float:
        """dirty / (clean + dirty): Kafka's cleanableRatio."""
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def cleanable_range(
    segments: Sequence[SegmentStats], *, first_dirty: int, high_watermark: int, now_ms: int,
    min_compaction_lag_ms: int,
) -> CleanableRange:
    """The whole segments the cleaner may rewrite now. `segments` are the log's, the active one last; a
    segment is cleanable when everything in it lies below the first uncleanable offset."""
    assert segments
    uncleanable = min(segments[-1].base_offset, high_watermark)
    for segment in segments:
        # Kafka: a dirty segment with a record younger than the lag, and everything after it, waits.
        if segment.base_offset >= first_dirty and now_ms - segment.max_timestamp_so_far < min_compaction_lag_ms:
            uncleanable = min(uncleanable, segment.base_offset)
            break
    chosen = []
    clean_bytes = dirty_bytes = 0
    end = first_dirty
    for segment, following in zip(segments, segments[1:], strict=False):
        if following.base_offset > uncleanable:
            break
        chosen.append((segment, following.base_offset))
        if following.base_offset <= first_dirty:
            clean_bytes += segment.size
        else:
            dirty_bytes += segment.size
            end = following.base_offset
    return CleanableRange(first_dirty, end, clean_bytes, dirty_bytes, tuple(chosen))


def compaction_overdue(cleanable: CleanableRange, *, now_ms: int, max_compaction_lag_ms: int) -> bool:
    """KIP-354: a dirty segment older than max.compaction.lag.ms must be cleaned whatever the ratio. The
    segment's largest batch timestamp stands for its age (it errs on the late side)."""
    dirty = [segment for segment, after in cleanable.segments if after > cleanable.first_dirty]
    return bool(dirty) and now_ms - dirty[0].max_timestamp_so_far > max_compaction_lag_ms


def needs_cleaning(cleanable: CleanableRange, *, min_cleanable_ratio: float, overdue: bool) -> bool:
    """Kafka cleans a log whose ratio is above min.cleanable.dirty.ratio, or any dirty bytes when overdue."""
    return cleanable.dirty_bytes > 0 and (overdue or cleanable.dirty_ratio > min_cleanable_ratio)


def group_by_size(
    segments: Sequence[tuple[SegmentStats, int]], *, max_bytes: int
) -> list[list[tuple[SegmentStats, int]]]:
    """Consecutive segments merged into one cleaned segment each (Kafka's groupSegmentsBySize): a group's
    bytes stay within segment.bytes and its offsets within an int32 of its base, as one segment's must."""
    groups: list[list[tuple[SegmentStats, int]]] = []
    for segment, after in segments:
        current = groups[-1] if groups else None
        if (current is not None and sum(s.size for s, _ in current) + segment.size <= max_bytes
                and after - 1 - current[0][0].base_offset <= INT32_MAX):
            current.append((segment, after))
        else:
            groups.append([(segment, after)])
    return groups


def delete_horizon_ms(last_clean_segment_mtime_ms: int | None, delete_retention_ms: int) -> int:
    """Tombstones in segments last modified at or before this time are dropped (Kafka's deleteHorizonMs:
    the clean section's newest segment's last-modified time minus delete.retention.ms; with no clean
    section yet, none are). A cleaned segment keeps its sources' newest mtime, so re-cleaning does not
    postpone the horizon."""
    if last_clean_segment_mtime_ms is None:
        return 0
    return last_clean_segment_mtime_ms - delete_retention_ms


def retain_record(
    *, key: bytes | None, value: bytes | None, offset: int, latest_offset: int | None, retain_tombstones: bool
) -> bool:
    """Whether the cleaner keeps a record (Kafka's shouldRetainRecord): a keyless record never (compacted
    topics refuse them); one superseded by a later record of its key never; a tombstone (null value) only
    until the delete horizon passes its segment."""
    if key is None:
        return False
    if latest_offset is not None and offset < latest_offset:
        return False
    return value is not None or retain_tombstones


class OffsetMap:
    """Key -> the last offset seen for it, bounded like Kafka's SkimpyOffsetMap: keys are stored as their
    MD5 (collisions, 2^-128 a pair, are accepted as Kafka accepts them), and the capacity is what the
    dedupe buffer would hold at 24 bytes an entry."""

    def __init__(self, buffer_bytes: int) -> None:
        self.capacity = int(buffer_bytes // OFFSET_MAP_ENTRY_BYTES * OFFSET_MAP_LOAD_FACTOR)
        assert self.capacity > 0, buffer_bytes
        self._offsets: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def free(self) -> int:
        return self.capacity - len(self._offsets)

    def put(self, key: bytes, offset: int) -> None:
        digest = hashlib.md5(key, usedforsecurity=False).digest()
        assert digest in self._offsets or len(self._offsets) < self.capacity, "offset map full"
        self._offsets[digest] = offset

    def get(self, key: bytes) -> int | None:
        return self._offsets.get(hashlib.md5(key, usedforsecurity=False).digest())

    def clear(self) -> None:
        self._offsets.clear()
