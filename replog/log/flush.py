"""Flushing a partition log off the event loop: what to fsync (FlushTicket), and the recovery point it earns."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from replog.log.checkpoint import fsync_directory
from replog.log.log_segments import LogSegments
from replog.log.segment_files import OS_FILE_OPS, SegmentFileOps


@dataclass(frozen=True, slots=True)
class FlushTicket:
    """What to fsync off the event loop; `offset` becomes the recovery point."""

    offset: int
    generation: int
    directory: Path
    files: tuple
    file_ops: SegmentFileOps = OS_FILE_OPS

    def fsync(self) -> None:
        for file in self.files:
            try:
                self.file_ops.fsync(file.fileno())
            except ValueError:
                continue  # closed by a concurrent close(): nothing left to persist
        fsync_directory(self.directory)


class RecoveryPoint:
    """The offset below which the log is known to be on disk (Kafka's recoveryPoint): after a crash, only
    segments from here on are recovered. A flush is prepared on the event loop, fsynced in an executor and
    completed on the loop again; a truncation in between starts a new generation, so that its ticket, which
    may cover offsets that are gone, moves nothing."""

    def __init__(self, offset: int) -> None:
        assert offset >= 0
        self._offset = offset
        self._generation = 0

    @property
    def offset(self) -> int:
        return self._offset

    def prepare(self, segments: LogSegments, end: int, directory: Path, file_ops: SegmentFileOps) -> FlushTicket:
        """The files holding offsets in [recovery point, end)."""
        files = []
        for segment in reversed(segments.values()):
            if segment.next_offset <= self._offset:
                break
            if segment.base_offset < end:
                files += [segment.file, segment.offset_index.file, segment.time_index.file]
        return FlushTicket(end, self._generation, directory, tuple(files), file_ops)

    def complete(self, ticket: FlushTicket, log_end_offset: int) -> bool:
        """Advance to the ticket's offset; a ticket from before a truncation is ignored."""
        if ticket.generation != self._generation:
            return False
        assert ticket.offset <= log_end_offset, (ticket.offset, log_end_offset)
        if ticket.offset <= self._offset:
            return False
        self._offset = ticket.offset
        return True

    def truncate_to(self, log_end_offset: int) -> None:
        """The log lost everything from `log_end_offset` on; flushes prepared before no longer count."""
        self._offset = min(self._offset, log_end_offset)
        self._generation += 1

    def reset_to(self, offset: int) -> None:
        """The log was emptied and restarts at `offset`: nothing is left to recover."""
        self._offset = offset
        self._generation += 1
