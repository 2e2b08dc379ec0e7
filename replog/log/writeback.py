"""Early writeback: start writing a segment's new bytes to disk every `interval` bytes appended, never waiting.

Every replica writes what it appends into the page cache, so at 100 MB/s three replicas dirty 300 MB/s. Left
alone, the dirty set grows until the VM's background threshold (dirty_background_ratio, ~2 GB on the
development VM), and from there the flusher writes it back in bursts of hundreds of MB, during which a segment
write can block in the kernel for 3-45 ms, and with it the event loop that made it: the p99 windows of 45-296
ms at 100 MB/s (docs/profiles/rf3-linger0.md, "Fifth pass"; docs/profiles/rf3-follower-round.md). Starting the writeback of each
range soon after it is written, in small pieces, keeps the dirty set small, as RocksDB's `bytes_per_sync` does.

The call is sync_file_range(fd, start, length, SYNC_FILE_RANGE_WRITE): it only queues the range's dirty pages
for writing; without the WAIT flags it neither waits for that I/O nor for pages already under writeback. But
queueing can itself block while the device's request queue is full (its man page says so, and on the
development VM, with other benchmarks writing, single calls blocked up to 117 ms), and appends run on the
event loop: so the calls are made by one background thread (BackgroundWriteback), on a duplicate of the
segment's descriptor, and a request that finds 64 already waiting is dropped. It makes nothing durable (no metadata, no disk cache flush): durability stays with the flush
policy and replication, as before. Python's os module has no sync_file_range (3.11-3.13 offer fdatasync and
posix_fadvise, not it), so it is called through ctypes on the C library, as append_reservation.py does for
fallocate. Where the call is missing (not Linux, a C library without it) or refused (ENOSYS, EINVAL: a file
system that does not support it, ESPIPE), early writeback stops for that segment without a word: it only ever
was an optimisation.
"""

from __future__ import annotations

import ctypes
import errno
import os
import queue
import sys
import threading
from collections.abc import Callable
from typing import Protocol

SYNC_FILE_RANGE_WRITE = 0x2  # <fcntl.h>; WAIT_BEFORE (0x1) and WAIT_AFTER (0x4) are never passed
# Ranges end at a page boundary: the last page, partly written, is written again by the next append, and a write
# into a page under writeback waits for that I/O to finish on devices that need stable pages (RocksDB's
# RangeSync aligns for the same reason).
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
# log.writeback.interval.bytes: 1 MiB took the 100 MB/s p99 windows from 27-1,320 ms to 9-11 ms in 5 of 6 runs on the
# idle VM (docs/profiles/rf3-follower-round.md, "On the quiet VM").
DEFAULT_INTERVAL_BYTES = 1 << 20
_UNSUPPORTED = frozenset({errno.ENOSYS, errno.EINVAL, errno.ESPIPE, errno.EOPNOTSUPP})


def _libc_sync_file_range():
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    # glibc declares the offsets off64_t on every platform.
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_SYNC_FILE_RANGE = _libc_sync_file_range()


def start_writeback(fd: int, start: int, length: int) -> None:
    """sync_file_range(fd, start, length, SYNC_FILE_RANGE_WRITE); OSError (ENOSYS where unavailable)."""
    assert start >= 0 and length > 0
    if _SYNC_FILE_RANGE is None:
        raise OSError(errno.ENOSYS, "sync_file_range is not available on this platform")
    if _SYNC_FILE_RANGE(fd, start, length, SYNC_FILE_RANGE_WRITE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


class BackgroundWriteback:
    """Makes the writeback calls on one daemon thread, started with the first; the appending thread only
    duplicates the descriptor (so the right file is written back even if the segment closes meanwhile) and
    queues. Bounded: with MAX_QUEUED calls waiting (the device is that far behind) a new one is dropped."""

    MAX_QUEUED = 64

    def __init__(self, call: Callable[[int, int, int], None] = start_writeback, *,
                 available: bool = _SYNC_FILE_RANGE is not None) -> None:  # fmt: skip
        self._call = call
        self._queue: queue.Queue[tuple[int, int, int]] = queue.Queue(self.MAX_QUEUED)
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.unsupported = not available  # the call was refused once: every later submit raises ENOSYS
        self.dropped = 0

    def submit(self, fd: int, start: int, length: int) -> None:
        """Queue sync_file_range(fd, start, length, WRITE); OSError(ENOSYS) once the call proved unsupported."""
        if self.unsupported:
            raise OSError(errno.ENOSYS, "sync_file_range is not supported here")
        if self._thread is None:
            with self._start_lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="replog-writeback", daemon=True)
                    self._thread.start()
        duplicate = os.dup(fd)
        try:
            self._queue.put_nowait((duplicate, start, length))
        except queue.Full:
            os.close(duplicate)
            self.dropped += 1

    def join(self) -> None:
        """Wait until every queued call was made."""
        self._queue.join()

    def _run(self) -> None:
        while True:
            fd, start, length = self._queue.get()
            try:
                self._call(fd, start, length)
            except OSError as exc:
                if exc.errno in _UNSUPPORTED:
                    self.unsupported = True
            finally:
                os.close(fd)
                self._queue.task_done()


BACKGROUND = BackgroundWriteback()


class WritebackOps(Protocol):
    def start_writeback(self, fd: int, start: int, length: int) -> None: ...


class SegmentWriteback:
    """Where one segment's bytes not yet handed to writeback begin; `interval_bytes` 0 turns it off."""

    __slots__ = ("interval_bytes", "pending_from", "supported")

    def __init__(self, interval_bytes: int, size: int) -> None:
        assert interval_bytes >= 0
        self.interval_bytes = interval_bytes
        self.pending_from = size
        self.supported = interval_bytes > 0

    def after_append(self, ops: WritebackOps, fd: int, start: int, end: int) -> None:
        """Bytes [start, end) were just appended: once `interval_bytes` are pending, start their writeback."""
        if not self.supported:
            return
        if start < self.pending_from:
            self.pending_from = start - start % PAGE_BYTES  # truncated below what was handed over
        whole_pages_end = end - end % PAGE_BYTES
        length = whole_pages_end - self.pending_from
        if length < self.interval_bytes:
            return
        try:
            ops.start_writeback(fd, self.pending_from, length)
        except OSError as exc:
            if exc.errno in _UNSUPPORTED:
                self.supported = False
                return
            # Anything else (EIO) is the next write's or fsync's to report; this one only tried to help.
        self.pending_from = whole_pages_end
