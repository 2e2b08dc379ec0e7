"""A broker's budget of open segment files: `log.open.files.max` (replog's own key; Kafka keeps every segment's
files open and leaves the limit to `ulimit -n`).

Segments report the descriptors they open (a log file is one, a mapped index two: Python's mmap keeps a
duplicate), in least-recently-used order. When the total passes the budget, the least recently used segments
give theirs back and reopen them on their next use, so a partition written or read often keeps its active
segment open while idle partitions cost no descriptor at all.

Closing never cuts a read short: a segment drops its reference to the file object rather than closing it,
and a FileSlice a response is still sending from (or a flush ticket) holds another, so CPython closes the
descriptor when the last holder lets go (see SharedFile). The budget is used from the event loop thread
only: logs opened in worker threads join it when the LogManager adopts them.
"""

from __future__ import annotations

import io
import resource
from collections import OrderedDict
from typing import Protocol

# `log.open.files.max` = -1: this share of the process's soft RLIMIT_NOFILE; the rest is left to sockets,
# checkpoints being written and descriptors held past eviction by responses in flight.
DEFAULT_SHARE_OF_FILE_LIMIT = 0.5
# Below this a broker would reopen files on almost every request; a segment fully open holds five.
MIN_OPEN_FILES = 64


class SharedFile(io.FileIO):
    """A file closed by whoever drops the last reference to it: a segment evicting its handles, or a response
    done sending from it. Closing it at finalization is deliberate, so it raises no ResourceWarning."""

    def __del__(self) -> None:
        self.close()


class FileHolder(Protocol):
    def release_file_handles(self) -> None:
        """Give back every descriptor; reopened on the next use."""


def default_max_open_files() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(MIN_OPEN_FILES, int(soft * DEFAULT_SHARE_OF_FILE_LIMIT))


class FileBudget:
    def __init__(self, max_open_files: int) -> None:
        if max_open_files < MIN_OPEN_FILES:
            raise ValueError(f"log.open.files.max must be at least {MIN_OPEN_FILES} (or -1), not {max_open_files}")
        self.max_open_files = max_open_files
        self._holders: OrderedDict[FileHolder, int] = OrderedDict()  # least recently used first
        self._open_files = 0
        self.evictions = 0

    @property
    def open_files(self) -> int:
        """Descriptors the segments hold now (not counting ones kept past eviction by a response)."""
        return self._open_files

    @property
    def holders(self) -> int:
        return len(self._holders)

    def used(self, holder: FileHolder) -> None:
        """`holder` used an open file: it becomes the most recently used."""
        if holder in self._holders:
            self._holders.move_to_end(holder)

    def opened(self, holder: FileHolder, count: int) -> None:
        """`holder` opened `count` descriptors; the least recently used others close theirs while the budget
        is exceeded. The holder itself is never evicted here, so it may use what it just opened."""
        assert count >= 0
        self._holders[holder] = self._holders.get(holder, 0) + count
        self._holders.move_to_end(holder)
        self._open_files += count
        while self._open_files > self.max_open_files:
            victim, held = next(iter(self._holders.items()))
            if victim is holder:
                break  # it alone exceeds the budget: MIN_OPEN_FILES makes that one segment's worth at most
            del self._holders[victim]
            self._open_files -= held
            self.evictions += 1
            victim.release_file_handles()

    def closed(self, holder: FileHolder) -> None:
        """`holder` closed all its descriptors (idempotent)."""
        self._open_files -= self._holders.pop(holder, 0)
