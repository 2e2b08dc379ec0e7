"""Flushing a partition log off the event loop: what to fsync, and the recovery point it earns."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from replog.log.checkpoint import fsync_directory
from replog.log.segment import OS_FILE_OPS, SegmentFileOps


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
