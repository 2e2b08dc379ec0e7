"""KIP-630 snapshots: when to take one, and moving one to a follower in FetchSnapshot chunks.

A snapshot is identified by (end offset, epoch): it holds the state after applying every committed entry
below the end offset, the last of which has that epoch. The state machine takes it (only committed entries
are in it); the log keeps it atomically and deletes what is before it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from replog.raft.messages import OffsetAndEpoch

MAX_SNAPSHOT_BYTES = 1 << 30  # a FetchSnapshot `size` above this is refused rather than buffered
MAX_SNAPSHOT_CHUNK_BYTES = 1 << 20  # what one FetchSnapshot asks for and a leader sends at most


@dataclass(frozen=True, slots=True)
class SnapshotPolicy:
    """Take a snapshot after this many committed records or bytes since the last one (whichever first);
    Kafka's metadata.log.max.record.bytes.between.snapshots, plus a record count the simulation can use."""

    max_records: int = 20_000
    max_bytes: int = 20 * 1024 * 1024

    def due(self, records_since: int, bytes_since: int) -> bool:
        return records_since >= self.max_records or bytes_since >= self.max_bytes


def snapshot_chunk(data: bytes, position: int, max_bytes: int) -> bytes:
    assert 0 <= position <= len(data) and max_bytes > 0
    return data[position:position + max_bytes]


@dataclass(slots=True)
class SnapshotDownload:
    """A follower's FetchSnapshot in progress: the bytes so far, in order."""

    snapshot_id: OffsetAndEpoch
    size: int | None = None
    received: bytearray = field(default_factory=bytearray)

    @property
    def position(self) -> int:
        return len(self.received)

    def accept(self, snapshot_id: OffsetAndEpoch, size: int, position: int, chunk: bytes) -> bool:
        """Add a chunk; False when it does not continue this download (stale, duplicate, or resized)."""
        if snapshot_id != self.snapshot_id or position != self.position or not 0 <= size <= MAX_SNAPSHOT_BYTES:
            return False
        if self.size is not None and size != self.size:
            return False
        if position + len(chunk) > size:
            return False
        self.size = size
        self.received += chunk
        return True

    @property
    def complete(self) -> bool:
        return self.size is not None and self.position == self.size
