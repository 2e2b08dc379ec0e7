"""Creating a segment index's file: the system calls (IndexFileOps, injectable), the all-or-nothing creation
of a new, preallocated and mapped index file, and the worker thread that creates them off the event loop.

A new segment's index files are created lazily (index.py), at the first entry, which once came 4 KiB into
every new segment on the event loop: `open(O_CREAT)`, `ftruncate` and `mmap` took 11-17% of each broker's
samples while 1,000 partitions RF=3 got their first entries (docs/profiles/partition-scaling.md). The
segment now starts the creation in a worker thread at an append that writes no entry (a new segment's
first), and the index waits for it only if an entry, a resize or a release comes before it is done.
"""

from __future__ import annotations

import io
import mmap
import os
import threading
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from replog.log.file_budget import SharedFile

# A file being created has this suffix until it is complete, and then takes its name with a link, which fails
# rather than replace a file of that name: a half-made file is never seen under the index's name, and an
# index opened meanwhile under that name (a log reopened in the same process, as tests of a crash do while an
# abandoned log's creation still runs) is never written over. The log loader deletes leftovers of a crash.
CREATING_SUFFIX = ".creating"
# Index files are sparse: the preallocated size is set with ftruncate, which reserves no blocks. Writing
# through the mmap into a page the file system cannot allocate (a full disk) raises SIGBUS and kills the
# process, so pages are allocated with posix_fallocate, which fails with ENOSPC, before entries go in.
ALLOCATION_CHUNK = mmap.PAGESIZE


class IndexFileOps:
    """The system calls that create an index file and ready its next pages before entries are written through
    the map. Tests pass a recording (or failing) subclass."""

    def create(self, path: Path) -> int:
        """A new file's descriptor; never one that existed (the creation removes what it made if it fails)."""
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)

    def publish(self, staging: Path, path: Path) -> None:
        """Give the complete file its name, unless a file has it already (FileExistsError)."""
        os.link(staging, path)
        staging.unlink(missing_ok=True)

    def set_size(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def map(self, fd: int, size: int) -> mmap.mmap:
        return mmap.mmap(fd, size)

    def allocate(self, fd: int, offset: int, length: int) -> None:
        """Blocks for [offset, offset + length): ENOSPC here rather than SIGBUS in the mapping."""
        os.posix_fallocate(fd, offset, length)

    def populate(self, fd: int, offset: int, length: int) -> None:
        """Write the range's bytes (zeros, which is what an index holds past its entries) into the page cache.
        The first write into a hole or a fallocated (unwritten) page through a shared mapping is a page fault
        that cost 4-9 ms (median) on ext4 on the loaded 2-vCPU VM, taken with the GIL held, while a pwrite of
        the same page cost 0.01-0.04 ms and the mapped write after it 0.01 ms (docs/profiles/
        partition-scaling.md): with 1,000 partitions RF=3 that was some 2,000 stalls of each broker's event
        loop as new segments got their first index entries."""
        os.pwrite(fd, bytes(length), offset)


OS_INDEX_FILE_OPS = IndexFileOps()


class CreatedIndexFile(NamedTuple):
    """A new index file, preallocated to `size` bytes (sparse) and mapped."""

    file: io.FileIO
    mapping: mmap.mmap | None  # None for an index of size 0


def creating_path(path: Path) -> Path:
    return path.with_name(path.name + CREATING_SUFFIX)


def create_index_file(path: Path, size: int, ops: IndexFileOps = OS_INDEX_FILE_OPS) -> CreatedIndexFile:
    """Create, size and map a new index file, all or nothing: on any failure the descriptors are closed and
    the file removed before the error is raised. Touches no index state, so it may run in any thread. Its
    pages are allocated and populated by the index's first entry (reserve, two short calls): a file created
    ahead of need that never gets an entry (a partition whose data fits one batch) costs no dirty page."""
    staging = creating_path(path)
    fd = ops.create(staging)
    file = SharedFile(fd, "r+")
    mapping = None
    try:
        ops.set_size(fd, size)
        if size > 0:
            mapping = ops.map(fd, size)
        ops.publish(staging, path)
    except BaseException:
        if mapping is not None:
            mapping.close()
        file.close()
        staging.unlink(missing_ok=True)
        raise
    return CreatedIndexFile(file, mapping)


_shared_creator: Executor | None = None
_shared_creator_lock = threading.Lock()


def shared_index_creator() -> Executor:
    """The process's worker thread for index file creation, started on first use. One is enough to keep the
    creations off the event loop: each is a few system calls that release the GIL."""
    global _shared_creator
    with _shared_creator_lock:
        if _shared_creator is None:
            _shared_creator = ThreadPoolExecutor(max_workers=1, thread_name_prefix="index-create")
        return _shared_creator
