"""What a node hands its state machine (KRaft's listener): a snapshot to load, then committed entries in order.

The queue only remembers where the state machine is; entries are read from the log when taken, up to the
high watermark, so nothing is buffered twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from replog.raft.messages import LogEntry, OffsetAndEpoch
from replog.raft.raft_log import RaftLog


@dataclass(frozen=True, slots=True)
class Committed:
    offset: int
    entry: LogEntry


@dataclass(frozen=True, slots=True)
class LoadSnapshot:
    """Replace the state machine's state with the snapshot's before applying anything after it."""

    snapshot_id: OffsetAndEpoch
    data: bytes


class CommitQueue:
    def __init__(self, log: RaftLog) -> None:
        snapshot = log.latest_snapshot_id()
        self._pending_load = snapshot  # a restarted node first reloads its latest snapshot
        self.next_offset = snapshot.offset if snapshot is not None else log.start_offset

    def snapshot_installed(self, snapshot_id: OffsetAndEpoch) -> None:
        """A snapshot fetched from the leader replaced the log: the state machine starts over from it."""
        self._pending_load = snapshot_id
        self.next_offset = snapshot_id.offset

    def take(self, log: RaftLog, high_watermark: int | None) -> list[Committed | LoadSnapshot]:
        out: list[Committed | LoadSnapshot] = []
        if self._pending_load is not None:
            out.append(LoadSnapshot(self._pending_load, log.read_snapshot(self._pending_load)))
            self.next_offset = max(self.next_offset, self._pending_load.offset)
            self._pending_load = None
        if high_watermark is not None:
            assert self.next_offset >= log.start_offset
            end = min(high_watermark, log.end_offset)
            while self.next_offset < end:
                entries = log.read(self.next_offset, end - self.next_offset)
                out.extend(Committed(self.next_offset + i, entry) for i, entry in enumerate(entries))
                self.next_offset += len(entries)
        return out
