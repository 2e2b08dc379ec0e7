"""Disk blocks allocated past the end of the active segment's file, ahead of its large appends.

On ext4 a write that extends a file pays delayed allocation on the writer's thread: a block reservation and
an extent-status entry for every 4 KiB page. A write into blocks already allocated past the end of the
file (fallocate with FALLOC_FL_KEEP_SIZE) skips that work: a 1 MB append took 107-119 us of CPU instead of
160-186 us on the development VM, and on a follower catching up the append is the event loop's largest
stage (docs/profiles/consume.md, "Follower catch-up, fifth pass"). XFS allocates ahead of appends by
itself (speculative preallocation); this does the same on file systems that do not.

The file's size does not change, so recovery, reads, sendfile slices and anything that looks at the size see
exactly the bytes written. Only appends of LARGE_APPEND_BYTES or more reserve, RESERVE_AHEAD_BYTES at a
time: a broker with many partitions of small appends holds no reserved space for them. The blocks past the
end are given back when the segment stops being active (seal, close); a truncation gives them back by
itself. After a crash they stay allocated until the segment is deleted: at most one reservation per
partition's active segment. Bytes not yet written back when the power fails read as zeros there (the
blocks are allocated but unwritten), which recovery's batch and CRC checks cut off as they do a torn write.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import sys
from typing import Protocol

logger = logging.getLogger(__name__)

LARGE_APPEND_BYTES = 256 * 1024
RESERVE_AHEAD_BYTES = 4 * 1024 * 1024
_FALLOC_FL_KEEP_SIZE = 0x01
# The file system cannot allocate ahead: stop asking for this segment. Anything else (ENOSPC) is left to the
# write, which reports a full disk itself.
_UNSUPPORTED = frozenset({errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})


def _libc_fallocate():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        function = libc.fallocate64  # 64-bit offsets whatever the platform's off_t
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    function.restype = ctypes.c_int
    return function


_FALLOCATE = _libc_fallocate()


def allocate_past_end(fd: int, offset: int, length: int) -> None:
    """fallocate(fd, FALLOC_FL_KEEP_SIZE, offset, length); raises OSError (EOPNOTSUPP where unavailable)."""
    assert offset >= 0 and length > 0
    if _FALLOCATE is None:
        raise OSError(errno.EOPNOTSUPP, "fallocate is not available on this platform")
    if _FALLOCATE(fd, _FALLOC_FL_KEEP_SIZE, offset, length) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def free_past_end(fd: int, size: int) -> None:
    """Give back the blocks past `size` with a truncation to that size, keeping the file's modification time
    (the log cleaner's tombstone horizon reads it as the time of the last write). A file whose size is not
    `size` (a torn write that could not be cut off: its directory is offline) is left alone."""
    before = os.fstat(fd)
    if before.st_size != size:
        return
    os.ftruncate(fd, size)
    os.utime(fd, ns=(before.st_atime_ns, before.st_mtime_ns))


class ReservationOps(Protocol):
    def allocate_past_end(self, fd: int, offset: int, length: int) -> None: ...

    def free_past_end(self, fd: int, size: int) -> None: ...


class AppendReservation:
    """How far past its size one segment file has blocks allocated, as far as this process knows."""

    __slots__ = ("reserved_end", "supported")

    def __init__(self, size: int) -> None:
        self.reserved_end = size
        self.supported = True

    def before_append(self, ops: ReservationOps, fd: int, size: int, length: int) -> None:
        """Allocate ahead if a large append at `size` would run past what is allocated."""
        if length < LARGE_APPEND_BYTES or not self.supported or size + length <= self.reserved_end:
            return
        ahead = max(RESERVE_AHEAD_BYTES, length)
        try:
            ops.allocate_past_end(fd, size, ahead)
        except OSError as exc:
            if exc.errno in _UNSUPPORTED:
                self.supported = False
            return
        self.reserved_end = size + ahead

    def truncated(self, size: int) -> None:
        """The file was truncated to `size`, which freed every block past it."""
        self.reserved_end = size

    def release(self, ops: ReservationOps, fd: int, size: int) -> None:
        """Give back what is allocated past `size`; a failure leaves the blocks until the file is deleted."""
        if self.reserved_end <= size:
            return
        try:
            ops.free_past_end(fd, size)
        except OSError as exc:
            logger.warning("cannot free the blocks allocated past byte %d of a segment: %r", size, exc)
        self.reserved_end = size
