"""Checkpoint files written and fsynced in a worker thread, so the event loop never waits for a disk.

A broker rewrites small checkpoint files often: the offset checkpoints of each log dir (HW, recovery point,
log start) and one leader-epoch checkpoint per partition, which a LeaderAndIsr that moves 300 leaderships
rewrites 300 times. Each write is atomic and durable (write_atomically: tmp file, fsync, rename, fsync of the
directory), about a millisecond on an idle disk and far more on a busy one: on the event loop that stalls
every client and the follower fetches (KAFKA-15046 moved Kafka's from under the log lock for the same reason).

Per file, the latest value wins: a submission replaces a pending, not yet started, write of the same file,
and a file has at most one write in flight, so two writes of one file never run at once and an earlier
value is never written after a later one. The in-memory state (the epoch cache, the logs' offsets) stays
the truth while a write is pending; what a crash before the write leaves on disk, and why that is safe, is
said by each caller (log_manager.py, epoch_cache.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from replog.log.checkpoint import write_atomically

log = logging.getLogger(__name__)

FailureHandler = Callable[[Path, OSError], None]


def write_if_directory_exists(path: Path, data: bytes) -> None:
    """A partition deleted after its checkpoint was submitted has no directory left to write into (Kafka's
    LeaderEpochFileCache.writeIfDirExists): skipped, not a disk failure."""
    if not path.parent.is_dir():
        return
    try:
        write_atomically(path, data)
    except FileNotFoundError:
        if path.parent.is_dir():
            raise


class CheckpointWriter:
    """Writes checkpoint files off the event loop; one worker thread, so writes reach the disk one at a time
    (a single disk gains nothing from more, and the event loop's process keeps its other core)."""

    def __init__(self, on_failure: FailureHandler,
                 write: Callable[[Path, bytes], None] = write_if_directory_exists) -> None:
        """`on_failure(log_dir, error)` hears of a write that failed (the log dir goes offline)."""
        self._on_failure = on_failure
        self._write = write
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint-writer")
        self._pending: dict[Path, tuple[bytes, Path]] = {}  # file -> (latest data, its log dir)
        self._writing: dict[Path, asyncio.Task] = {}
        self._disk = threading.Lock()  # held by every write, so write_now never overlaps one in flight
        self.writes = 0  # completed, for tests and metrics

    @property
    def idle(self) -> bool:
        return not self._pending and not self._writing

    def submit(self, path: Path, data: bytes, log_dir: Path) -> None:
        """Write `data` to `path` soon; on the event loop. Replaces a pending write of the same file."""
        self._pending[path] = (data, log_dir)
        if path not in self._writing:
            self._writing[path] = asyncio.get_running_loop().create_task(self._drain(path))

    def write_now(self, path: Path, data: bytes) -> None:
        """Write `data` before returning, superseding a pending write of the file and waiting for one in
        flight (older data) to finish first; for a change that must be on disk before anything builds on it.
        An OSError reaches the caller, as an inline write's would."""
        self._pending.pop(path, None)
        with self._disk:
            write_atomically(path, data)

    @contextlib.contextmanager
    def deleting(self, directory: Path) -> Iterator[None]:
        """While the caller deletes `directory` (a partition's): its pending writes are dropped, and no write
        runs, so none recreates a file in it halfway through; a write queued behind finds it gone."""
        for path in [p for p in self._pending if p.parent == directory]:
            del self._pending[path]
        with self._disk:
            yield

    async def _drain(self, path: Path) -> None:
        loop = asyncio.get_running_loop()
        try:
            while (pending := self._pending.pop(path, None)) is not None:
                data, log_dir = pending
                try:
                    await loop.run_in_executor(self._executor, self._write_locked, path, data)
                except OSError as exc:
                    self._on_failure(log_dir, exc)
                else:
                    self.writes += 1
        finally:
            del self._writing[path]

    def _write_locked(self, path: Path, data: bytes) -> None:
        with self._disk:
            self._write(path, data)

    async def flush(self) -> None:
        """Until everything submitted before this call is on disk (or has failed)."""
        while self._writing:
            await asyncio.gather(*self._writing.values())

    async def close(self) -> None:
        await self.flush()
        await asyncio.to_thread(self._executor.shutdown, True)
