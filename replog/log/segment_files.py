"""A segment's files and the system calls on them: the names (`<20-digit base offset>` plus a suffix), the
slice of an open file that reads and sends are made of, and the injectable operations on a log file
(segment.py uses them; tests pass subclasses that fail)."""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path

from replog.log import append_reservation, writeback
from replog.log.errors import StorageError

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"


def segment_file_name(base_offset: int, suffix: str) -> str:
    assert base_offset >= 0
    return f"{base_offset:020d}{suffix}"


@dataclass(frozen=True, slots=True)
class FileSlice:
    """Bytes [position, position+length) of an open file, for sendfile or pread.

    Holding the file object keeps its fd open even after the segment is
    deleted or has given its descriptors back to the file budget: neither
    closes the log file, so CPython closes the fd when the last in-flight slice
    is dropped (SharedFile). That is replog's stand-in for Kafka's
    file.delete.delay.ms, and the pin that keeps eviction from cutting a send.
    """

    file: io.FileIO
    position: int
    length: int

    def read_bytes(self) -> bytes:
        data = os.pread(self.file.fileno(), self.length, self.position)
        if len(data) != self.length:
            raise StorageError(f"file shrank under a slice: wanted {self.length} bytes, got {len(data)}")
        return data


class SegmentFileOps:
    """The system calls a segment makes on its log file. Tests pass a subclass that fails some of them
    (ENOSPC after n bytes, EIO on read) to drive the storage error paths without a broken disk."""

    def write(self, fd: int, data: memoryview) -> int:
        return os.write(fd, data)

    def pread(self, fd: int, size: int, position: int) -> bytes:
        return os.pread(fd, size, position)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def allocate_past_end(self, fd: int, offset: int, length: int) -> None:
        append_reservation.allocate_past_end(fd, offset, length)

    def free_past_end(self, fd: int, size: int) -> None:
        append_reservation.free_past_end(fd, size)

    def start_writeback(self, fd: int, start: int, length: int) -> None:
        writeback.BACKGROUND.submit(fd, start, length)

    def rename(self, source: Path, target: Path) -> None:
        """One step of the cleaner's segment swap (segment_swap.py); tests fail it to simulate a crash."""
        os.replace(source, target)


OS_FILE_OPS = SegmentFileOps()
