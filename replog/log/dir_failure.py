"""Which log dirs have failed: Kafka's LogDirFailureChannel (KIP-112), and the guard on a log's I/O that
reports them.

Any OSError from an I/O operation in a log dir (ENOSPC, EIO, a failed fsync, too many open files) takes the
whole dir offline, as Kafka's maybeHandleIOException does: a disk that failed once cannot be trusted with
the rest of its partitions. The storage layer reports the failure here; the first report of a dir notifies
the listeners (the replica manager takes the dir's partitions offline), later ones are ignored. An offline
dir stays offline until the broker restarts. Sans-IO and single-threaded: report only from the event loop.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from pathlib import Path

from replog.log.errors import StorageError

log = logging.getLogger(__name__)

LogDirListener = Callable[[Path, OSError], None]


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._offline: dict[Path, OSError] = {}  # in failure order
        self._listeners: list[LogDirListener] = []

    def subscribe(self, listener: LogDirListener) -> None:
        self._listeners.append(listener)

    def report(self, log_dir: Path, error: OSError) -> bool:
        """`log_dir` failed with `error`; returns whether this is the first report of it."""
        log_dir = Path(log_dir)
        if log_dir in self._offline:
            return False
        self._offline[log_dir] = error
        log.error("log dir %s is offline: %s", log_dir, error)
        for listener in self._listeners:
            listener(log_dir, error)
        return True

    def is_offline(self, log_dir: Path) -> bool:
        # Asked before every log operation: the common case (no failure) costs one truth test.
        return bool(self._offline) and Path(log_dir) in self._offline

    @property
    def offline_dirs(self) -> list[Path]:
        return list(self._offline)


def disk_io(method):
    """Kafka's UnifiedLog.maybeHandleIOException, for a method of a partition's log (an object with
    `directory`, `log_dir`, `is_offline` and `report_disk_failure`): an OSError from the disk takes the log
    dir offline (reported to the failure channel) and travels on as a StorageError (KAFKA_STORAGE_ERROR).
    Once the dir is offline, the log refuses all I/O, so no partition in it half-applies anything more."""

    @functools.wraps(method)
    def guarded(log, *args, **kwargs):
        if log.is_offline:
            raise StorageError(f"{log.directory.name}: log dir {log.log_dir} is offline")
        try:
            return method(log, *args, **kwargs)
        except OSError as exc:
            log.report_disk_failure(exc)
            if isinstance(exc, StorageError):
                raise
            raise StorageError(exc.errno, f"{method.__name__} of {log.directory} failed: {exc.strerror}") from exc

    return guarded
