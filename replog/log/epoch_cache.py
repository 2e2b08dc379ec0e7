"""Leader epoch -> start offset cache (Kafka's LeaderEpochFileCache).

Entries are strictly increasing in both epoch and start offset. Every change is written to
`leader-epoch-checkpoint`: before the method returns, or, once the broker hands the cache a background
writer (LogManager with a CheckpointWriter), soon after in a worker thread, still fsynced.

A checkpoint written in the background may be stale after a crash, and that is safe, as for Kafka's
truncations since KAFKA-15046 / KAFKA-16541 (here also for `assign`, which Kafka still writes before
returning):
- extra entries (a truncation not yet written) start at or past the recovered log end, and loading the log
  drops them (PartitionLog._finish_load: truncate_from_end of the log end offset);
- missing entries (a new epoch not yet written) are those of batches past the recovery point, since the
  broker flushes the writer before it moves any recovery point (broker/server.py _checkpoint_offsets), and
  recovery re-reads exactly those batches and assigns their epochs again (recover_segments' on_batch). An
  entry of a leader that appended nothing in its epoch is lost with nothing to rebuild, and nothing needs
  it: the log holds no record of that epoch, and the broker comes back without the leadership.
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import NamedTuple, Protocol

from replog.log.checkpoint import LeaderEpochCheckpointFile

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class BackgroundCheckpoints(Protocol):
    """Where a cache's changes go once the broker runs (a CheckpointWriter, bound to the log's dir)."""

    def submit(self, path: Path, data: bytes) -> None: ...  # written and fsynced soon, in a worker thread

    def write_now(self, path: Path, data: bytes) -> None: ...  # before returning, after any earlier write


class LeaderEpochCache:
    def __init__(self, checkpoint_path: Path) -> None:
        self._checkpoint = LeaderEpochCheckpointFile(checkpoint_path)
        self._entries = [EpochEntry(epoch, start) for epoch, start in self._checkpoint.read()]
        self._check_monotonic()
        self._background: BackgroundCheckpoints | None = None

    def write_in_background(self, writer: BackgroundCheckpoints | None) -> None:
        """From now on, hand every change to `writer` instead of writing it before returning; None writes
        inline again (the broker is stopping, its writer flushed)."""
        self._background = writer

    def _check_monotonic(self) -> None:
        for earlier, later in zip(self._entries, self._entries[1:], strict=False):
            assert earlier.epoch < later.epoch, (earlier, later)
            assert earlier.start_offset < later.start_offset, (earlier, later)

    def _persist(self, durable: bool = True) -> None:
        self._check_monotonic()
        if self._background is not None:
            self._background.submit(self._checkpoint.path, self._checkpoint.encode(self._entries))
        else:
            self._checkpoint.write(self._entries, durable=durable)

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    def assign(self, epoch: int, start_offset: int, *, durable: bool = True) -> bool:
        """Record that `epoch` starts at `start_offset`; returns whether anything changed.

        An older epoch, or the latest epoch at a later offset, is ignored. The
        latest epoch at an earlier offset, like any newer epoch, first drops
        every entry it contradicts (epoch or start offset not below the new
        one), as Kafka does, so the cache stays monotonic in both fields. `durable=False` leaves the
        checkpoint unsynced, for a caller that syncs the file system before anyone relies on it.
        """
        assert epoch >= 0
        assert start_offset >= 0
        latest = self.latest_entry
        if latest is not None:
            if epoch < latest.epoch:
                return False
            if epoch == latest.epoch and start_offset >= latest.start_offset:
                return False
        while self._entries and (
            self._entries[-1].epoch >= epoch or self._entries[-1].start_offset >= start_offset
        ):
            self._entries.pop()
        self._entries.append(EpochEntry(epoch, start_offset))
        self._persist(durable)
        return True

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch of the entry with the largest start offset <= offset."""
        index = bisect.bisect_right(self._entries, offset, key=lambda e: e.start_offset)
        return self._entries[index - 1].epoch if index > 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) answered to OffsetForLeaderEpoch (facts section 2 table)."""
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._entries[-1].epoch:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._entries, requested_epoch, key=lambda e: e.epoch)
        if higher == len(self._entries):
            # Newer than anything we know (and not the latest): undefined.
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        next_start = self._entries[higher].start_offset
        if higher == 0:
            return requested_epoch, next_start
        return self._entries[higher - 1].epoch, next_start

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after `end_offset` (log truncated there)."""
        assert end_offset >= 0
        keep = bisect.bisect_left(self._entries, end_offset, key=lambda e: e.start_offset)
        if keep < len(self._entries):
            del self._entries[keep:]
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: the entry covering it moves up to it."""
        assert start_offset >= 0
        covered = bisect.bisect_right(self._entries, start_offset, key=lambda e: e.start_offset)
        if covered == 0:
            return
        floor = self._entries[covered - 1]
        if covered == 1 and floor.start_offset == start_offset:
            return
        self._entries[:covered] = [EpochEntry(floor.epoch, start_offset)]
        self._persist()

    def clear(self) -> None:
        """Forget every epoch (the log was emptied to restart at another offset). Written before returning even
        with a background writer: a stale file would give the empty log the epochs of the old one, below the
        new start, which loading it would not drop. Rare: the fast paths are assign and the truncations."""
        self._entries.clear()
        if self._background is not None:
            self._background.write_now(self._checkpoint.path, self._checkpoint.encode(self._entries))
        else:
            self._checkpoint.write(self._entries)
