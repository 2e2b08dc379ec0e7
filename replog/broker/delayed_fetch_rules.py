"""When a parked fetch may answer: Kafka's DelayedFetch.tryComplete cases as a pure function (facts §5).

Every input is state the broker holds in memory: leadership, epochs, and the cached positions of the fetch
offset (from the read that parked the fetch) and of the end it may read to (the log keeps its LEO's and its
HW's). Deciding therefore reads no file and cannot fail on a disk; the completion that follows reads afresh,
on the fetch path, where storage errors are answered.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from replog.log.offset_metadata import LogOffsetMetadata


@dataclass(frozen=True, slots=True)
class ParkedPartition:
    """One partition of a parked fetch, as it stands now."""

    # Cases A-D: the partition is still here, its log dir has not failed, and this broker leads it.
    leads: bool
    # Case E: the fetch's current leader epoch is still the leader's.
    epoch_matches: bool
    # Case H: the fetcher's last fetched epoch now diverges from our log.
    diverges: bool
    fetch_offset: LogOffsetMetadata
    # How far the fetch may read: the LEO for a follower, the HW for a consumer.
    end_offset: LogOffsetMetadata
    max_bytes: int


def bytes_available(fetch_offset: LogOffsetMetadata, end_offset: LogOffsetMetadata, max_bytes: int) -> int | None:
    """What a read from `fetch_offset` could return now, capped at `max_bytes` (case G's share); None when
    the fetch must answer at once instead."""
    assert max_bytes >= 0
    if fetch_offset.message_offset == end_offset.message_offset:
        # Nothing new. Checked before the segments: right after a roll the end may sit at the same offset
        # on the new segment, which is no reason to answer.
        return 0
    if fetch_offset.message_offset > end_offset.message_offset:
        return None  # case F: the log was truncated below the fetch offset
    if fetch_offset.message_offset_only or end_offset.message_offset_only:
        return None  # a position is unknown: the fresh read looks it up, where a storage error is handled
    # The fields compared directly (LogOffsetMetadata.on_same_segment and position_diff, with their checks
    # done above): every append runs this for each fetch parked on its partition.
    if fetch_offset.segment_base_offset != end_offset.segment_base_offset:
        # Case F: the fetch offset is on an older segment (a roll, or a fetcher falling behind), or the end
        # is (the log was truncated and refilled).
        return None
    return min(end_offset.relative_position - fetch_offset.relative_position, max_bytes)


def parked_partition_bytes(partition: ParkedPartition) -> int | None:
    """One partition's share of case G, or None when it makes the fetch answer at once (cases A-F, H)."""
    if not partition.leads or not partition.epoch_matches or partition.diverges:
        return None
    return bytes_available(partition.fetch_offset, partition.end_offset, partition.max_bytes)


def delayed_fetch_can_complete(partitions: Iterable[ParkedPartition], min_bytes: int) -> bool:
    """Whether the parked fetch answers now: any partition that must (cases A-F, H), or min_bytes of data
    over all partitions (case G). Stops at the first partition that decides it, so a caller passing them
    lazily looks only at those up to the one that does."""
    accumulated = 0
    for partition in partitions:
        available = parked_partition_bytes(partition)
        if available is None:
            return True
        accumulated += available
        if accumulated >= min_bytes > 0:
            return True
    return accumulated >= min_bytes
