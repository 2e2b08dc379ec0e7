"""An exclusive lock on a data directory for a process's whole life, as Kafka's FileLock on `.lock`.

Two brokers on one log dir would both append and hand out the same offsets; the second one must refuse to
start. The lock is `flock` on `<dir>/.lock`, so the kernel releases it when the process dies, however it dies;
the holder writes its pid into the file so the refusal can name it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILE_NAME = ".lock"


class DirectoryInUseError(RuntimeError):
    """Another process (or another open of this one) holds the directory's lock."""


class DirectoryLock:
    def __init__(self, directory: Path, fd: int) -> None:
        self.directory = directory
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, directory: Path) -> DirectoryLock:
        path = Path(directory) / LOCK_FILE_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise DirectoryInUseError(
                f"{directory} is in use by another process{holder}: its lock {path} is held. "
                "Two servers on one directory would corrupt it; give each its own."
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(Path(directory), fd)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor drops the flock
            self._fd = None


def _read_holder(fd: int) -> str:
    text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return f" (pid {text})" if text.isdigit() else ""
