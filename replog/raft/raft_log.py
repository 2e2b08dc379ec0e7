"""What the quorum needs from a log (KRaft's ReplicatedLog), the two log rules of pull replication, and an
in-memory log for the simulation.

Offsets are dense from `start_offset` (the end of the latest snapshot, or 0) to `end_offset`. An entry's
epoch is the epoch of the leader that appended it, so the log doubles as its own leader-epoch cache.
`flush` makes the tail durable; `MemoryRaftLog.lose_unflushed` is what a power loss does to it.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Protocol

from replog.raft.messages import LogEntry, OffsetAndEpoch


class RaftLog(Protocol):
    @property
    def start_offset(self) -> int: ...

    @property
    def end_offset(self) -> int: ...

    @property
    def flushed_end_offset(self) -> int: ...

    def last_offset_and_epoch(self) -> OffsetAndEpoch: ...

    def last_flushed_offset_and_epoch(self) -> OffsetAndEpoch: ...

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch: ...

    def append(self, entries: tuple[LogEntry, ...] | list[LogEntry]) -> None: ...

    def read(self, offset: int, max_entries: int) -> tuple[LogEntry, ...]: ...

    def truncate_to(self, offset: int) -> None: ...

    def flush(self) -> None: ...

    def latest_snapshot_id(self) -> OffsetAndEpoch | None: ...

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> bytes: ...

    def create_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None: ...

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None: ...


# ------------------------------------------------------------------ the rules


@dataclass(frozen=True, slots=True)
class ValidFetch:
    pass


@dataclass(frozen=True, slots=True)
class DivergingFetch:
    diverging_epoch: OffsetAndEpoch


@dataclass(frozen=True, slots=True)
class SnapshotNeeded:
    snapshot_id: OffsetAndEpoch


def validate_fetch(log: RaftLog, fetch_offset: int, last_fetched_epoch: int) -> ValidFetch | DivergingFetch | SnapshotNeeded:
    """The leader's check of a follower's position (ReplicatedLog.validateOffsetAndEpoch).

    Below the log start, or at it with an epoch other than the snapshot's, the follower needs the snapshot.
    Otherwise the follower's last epoch must end at or after its fetch offset in the leader's log too;
    if not, its log diverges after the (end offset, epoch) the leader returns.
    """
    snapshot = log.latest_snapshot_id()
    if snapshot is not None and (fetch_offset < log.start_offset or last_fetched_epoch < snapshot.epoch
                                 or (fetch_offset == log.start_offset and last_fetched_epoch != snapshot.epoch)):
        return SnapshotNeeded(snapshot)
    leader_end = log.end_offset_for_epoch(last_fetched_epoch)
    if leader_end.epoch != last_fetched_epoch or leader_end.offset < fetch_offset:
        return DivergingFetch(leader_end)
    return ValidFetch()


def truncation_offset(log: RaftLog, diverging_epoch: OffsetAndEpoch) -> int:
    """Where a follower truncates on DivergingEpoch (ReplicatedLog.truncateToEndOffset).

    If the follower has the leader's epoch too, the logs agree up to the smaller end of that epoch; if not,
    they agree up to the end of the follower's largest epoch below it.
    """
    local = log.end_offset_for_epoch(diverging_epoch.epoch)
    if local.epoch == diverging_epoch.epoch:
        return min(local.offset, diverging_epoch.offset, log.end_offset)
    return min(local.offset, log.end_offset)


# ------------------------------------------------------------------ in memory


class MemoryRaftLog:
    """A RaftLog in memory whose unflushed tail a simulated power loss takes away."""

    def __init__(self) -> None:
        self._start = 0
        self._start_epoch = 0  # the epoch of the entry before `_start` (the snapshot's), 0 for none
        self._entries: list[LogEntry] = []
        self._epoch_starts: list[tuple[int, int]] = []  # (epoch, first offset), both increasing
        self._flushed_end = 0
        self._snapshots: dict[OffsetAndEpoch, bytes] = {}

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._start + len(self._entries)

    @property
    def flushed_end_offset(self) -> int:
        return self._flushed_end

    @property
    def start_epoch(self) -> int:
        """The epoch of the entry just before the log start (the snapshot's), 0 without a snapshot."""
        return self._start_epoch

    def last_offset_and_epoch(self) -> OffsetAndEpoch:
        epoch = self._entries[-1].epoch if self._entries else self._start_epoch
        return OffsetAndEpoch(self.end_offset, epoch)

    def last_flushed_offset_and_epoch(self) -> OffsetAndEpoch:
        """The end of what a power loss leaves, and the epoch of its last entry."""
        end = max(self._flushed_end, self._start)
        return OffsetAndEpoch(end, self.epoch_at(end - 1) if end > self._start else self._start_epoch)

    def epoch_at(self, offset: int) -> int:
        assert self._start <= offset < self.end_offset
        return self._entries[offset - self._start].epoch

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch <= `epoch` this log has and the offset where it ends (LeaderEpochCache.endOffsetFor)."""
        index = bisect.bisect_right(self._epoch_starts, (epoch, float("inf"))) - 1
        if index < 0:
            return OffsetAndEpoch(self._start, self._start_epoch)
        found_epoch = self._epoch_starts[index][0]
        end = self._epoch_starts[index + 1][1] if index + 1 < len(self._epoch_starts) else self.end_offset
        return OffsetAndEpoch(end, found_epoch)

    def append(self, entries: tuple[LogEntry, ...] | list[LogEntry]) -> None:
        for entry in entries:
            last_epoch = self._epoch_starts[-1][0] if self._epoch_starts else self._start_epoch
            assert entry.epoch >= last_epoch, f"epoch {entry.epoch} appended after epoch {last_epoch}"
            if not self._epoch_starts or entry.epoch > self._epoch_starts[-1][0]:
                self._epoch_starts.append((entry.epoch, self.end_offset))
            self._entries.append(entry)

    def read(self, offset: int, max_entries: int) -> tuple[LogEntry, ...]:
        assert self._start <= offset <= self.end_offset and max_entries >= 0
        first = offset - self._start
        return tuple(self._entries[first:first + max_entries])

    def truncate_to(self, offset: int) -> None:
        assert self._start <= offset <= self.end_offset
        del self._entries[offset - self._start:]
        while self._epoch_starts and self._epoch_starts[-1][1] >= offset:
            self._epoch_starts.pop()
        self._flushed_end = min(self._flushed_end, offset)

    def flush(self) -> None:
        self._flushed_end = self.end_offset

    def lose_unflushed(self) -> None:
        """A power loss: what was appended since the last flush is gone."""
        self.truncate_to(max(self._flushed_end, self._start))

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        return max(self._snapshots, default=None)

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> bytes:
        return self._snapshots[snapshot_id]

    def create_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Keep the snapshot (written atomically) and delete the log before it, as KIP-630's cleaner does."""
        assert self._start <= snapshot_id.offset <= self.end_offset
        if snapshot_id.offset > self._start:
            assert self.epoch_at(snapshot_id.offset - 1) == snapshot_id.epoch
        self._snapshots = {snapshot_id: data}
        self._delete_before(snapshot_id)

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """A snapshot fetched from the leader replaces the whole log (the follower's log was behind it)."""
        self._snapshots = {snapshot_id: data}
        self._entries.clear()
        self._epoch_starts.clear()
        self._start, self._start_epoch = snapshot_id.offset, snapshot_id.epoch
        self._flushed_end = self._start

    def _delete_before(self, snapshot_id: OffsetAndEpoch) -> None:
        drop = snapshot_id.offset - self._start
        del self._entries[:drop]
        self._start, self._start_epoch = snapshot_id.offset, snapshot_id.epoch
        self._flushed_end = max(self._flushed_end, self._start)  # the snapshot itself is durable
        kept = [(epoch, start) for epoch, start in self._epoch_starts if start >= self._start]
        covering = [(epoch, start) for epoch, start in self._epoch_starts if start < self._start]
        if covering and self._entries and (not kept or kept[0][1] > self._start):
            kept.insert(0, (covering[-1][0], self._start))
        self._epoch_starts = kept
