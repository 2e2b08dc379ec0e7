"""An offset with the place its batch starts in the log (Kafka's LogOffsetMetadata).

Knowing the segment and the byte position of two offsets makes the bytes between them plain arithmetic: a
delayed fetch counts what it could return without an index lookup, and a follower's lag in bytes costs
nothing. The log fills the positions in where it already knows them (it wrote the end itself; a read has
just looked the fetch offset up). An offset whose position nobody has looked up yet is "message offset
only": comparing its position would need I/O, so the methods that do refuse it.
"""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN_SEGMENT = -1
UNKNOWN_POSITION = -1


@dataclass(frozen=True, slots=True)
class LogOffsetMetadata:
    message_offset: int
    segment_base_offset: int = UNKNOWN_SEGMENT
    # Where in that segment's file the batch holding message_offset starts (or the file's end, for the LEO).
    relative_position: int = UNKNOWN_POSITION

    def __post_init__(self) -> None:
        assert self.message_offset >= 0, self
        assert (self.segment_base_offset == UNKNOWN_SEGMENT) == (self.relative_position == UNKNOWN_POSITION), self
        assert self.segment_base_offset <= self.message_offset, self

    @property
    def message_offset_only(self) -> bool:
        """The position is unknown: it was never converted from the offset."""
        return self.segment_base_offset == UNKNOWN_SEGMENT

    def on_older_segment(self, other: LogOffsetMetadata) -> bool:
        assert not self.message_offset_only and not other.message_offset_only, (self, other)
        return self.segment_base_offset < other.segment_base_offset

    def on_same_segment(self, other: LogOffsetMetadata) -> bool:
        assert not self.message_offset_only and not other.message_offset_only, (self, other)
        return self.segment_base_offset == other.segment_base_offset

    def position_diff(self, other: LogOffsetMetadata) -> int:
        """Bytes from `other`'s position to ours; both must be on the same segment."""
        assert self.on_same_segment(other), (self, other)
        return self.relative_position - other.relative_position
