"""Sparse, mmapped segment indexes: offset -> file position and timestamp -> offset.

Files are preallocated to their maximum size and trimmed to the valid entries
when the segment rolls or closes. On open the valid entry count is the
position of the last nonzero byte, rounded up to whole entries: that reads a
trimmed file and a preallocated one (left by a crash) the same way. It works
because no valid entry after the first can be all zeros (offsets strictly
increase), and a lone all-zero first entry carries no information: a lookup
with no entry answers with the segment start anyway. Truncation therefore
zeroes the entries it drops. Indexes carry no checksum; a file that fails the
sanity check raises CorruptIndexError and the segment rebuilds it.

An index may give back its descriptors (release, for the broker's file budget) and reopens them on its next
use: the entry count and the mapped size are kept, so a reopen maps the file again and reads nothing.
Resizing a released index truncates the file by path, without opening it. The index of a new, empty
segment may be created lazily (as Kafka's LazyIndex): no file until the first entry or lookup needs one,
so thousands of new partitions cost no index files.
"""

from __future__ import annotations

import abc
import io
import mmap
import os
import struct
from collections.abc import Callable
from pathlib import Path

from replog.log.errors import CorruptIndexError
from replog.log.file_budget import SharedFile

INT32_MAX = (1 << 31) - 1
NO_TIMESTAMP = -1
# Index files are sparse: the preallocated size is set with ftruncate, which reserves no blocks. Writing
# through the mmap into a page the file system cannot allocate (a full disk) raises SIGBUS and kills the
# process, so pages are allocated with posix_fallocate, which fails with ENOSPC, before entries go in.
ALLOCATION_CHUNK = mmap.PAGESIZE


class IndexFileOps:
    """The system calls that ready an index file's next pages before entries are written through the map.
    Tests pass a recording subclass."""

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


class _MmapIndex(abc.ABC):
    """A file of fixed-size (key, value) entries, sorted by key, mapped into memory."""

    ENTRY: struct.Struct
    ENTRY_CODES: str

    def __init__(self, path: Path, base_offset: int, max_bytes: int, *, create_lazily: bool = False,
                 file_ops: IndexFileOps = OS_INDEX_FILE_OPS) -> None:  # fmt: skip
        """`create_lazily`: when the file does not exist, create it only once it is used."""
        assert base_offset >= 0
        assert max_bytes >= self.ENTRY.size
        self.path = Path(path)
        self._ops = file_ops
        self.base_offset = base_offset
        self._file: io.FileIO | None = None
        self._mm: mmap.mmap | None = None
        self._size = 0  # the file's (and the mapping's) length, known while released too
        self._entries = 0
        self._allocated = 0  # bytes from the start known to have blocks (see ALLOCATION_CHUNK)
        self._dirty = False  # entries written through the mapping since the last flush
        self._deleted = False
        # Told the descriptors a reopen took (the segment charges them to the broker's file budget).
        self.on_open: Callable[[int], None] | None = None
        self._created = not create_lazily or self.path.exists()
        if not self._created:
            self._size = self._round(max_bytes)
            return
        self._file = SharedFile(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644), "r+")
        try:
            self._open(max_bytes)
        except BaseException:
            self._file.close()
            raise

    def _open(self, max_bytes: int) -> None:
        size = os.fstat(self._file.fileno()).st_size
        if size % self.ENTRY.size != 0:
            raise CorruptIndexError(f"{self.path}: size {size} is not a multiple of {self.ENTRY.size}")
        if size == 0:
            self._remap(self._round(max_bytes))  # new file: preallocated, no entries
            return
        self._remap(size)
        self._entries = self._count_entries()
        self._sanity_check()

    def _round(self, max_bytes: int) -> int:
        return max_bytes // self.ENTRY.size * self.ENTRY.size

    def _remap(self, size: int) -> None:
        if self._deleted:
            return  # nothing left to size (a deleted segment's close still trims)
        self._size = size
        # Blocks of a file that existed before may be sparse too: only the entries are known to be written.
        self._allocated = min(self._allocated, size)
        if self._file is None:
            if self._created:
                os.truncate(self.path, size)  # released: stays released
            return
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        os.ftruncate(self._file.fileno(), size)
        if size > 0:
            self._mm = mmap.mmap(self._file.fileno(), size)

    def _open_file(self) -> io.FileIO:
        """The file, reopened and mapped again if it was released."""
        if self._file is None:
            file = SharedFile(os.open(self.path, os.O_RDWR if self._created else os.O_RDWR | os.O_CREAT, 0o644), "r+")
            if not self._created:
                os.ftruncate(file.fileno(), self._size)  # preallocated, as a new index is
                self._created = True
            if self._size > 0:
                self._mm = mmap.mmap(file.fileno(), self._size)
            self._file = file
            if self.on_open is not None:
                self.on_open(self.open_files)
        return self._file

    def _mapped(self) -> mmap.mmap:
        self._open_file()
        assert self._mm is not None
        return self._mm

    @property
    def open_files(self) -> int:
        """Descriptors held: the file's and, while mapped, the mapping's duplicate."""
        if self._file is None:
            return 0
        return 1 if self._mm is None else 2

    def release(self) -> None:
        """Unmap and drop the file (a flush ticket holding it keeps it open until its fsync is done).
        Written entries stay in the page cache; flush() fsyncs them through a fresh descriptor. Closing the
        map never meets a BufferError: entries are read with struct.unpack_from, which keeps no export."""
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        self._file = None

    def _count_entries(self) -> int:
        if self._mm is None:
            return 0
        assert self._file is not None
        # Read the file, not the mapping: touching a sparse page through a shared mapping allocates it (on
        # tmpfs), which on a full disk is SIGBUS. Entries are written from the start, so the first hole
        # (the file's end if it has none) bounds them.
        fd = self._file.fileno()
        used = len(os.pread(fd, os.lseek(fd, 0, os.SEEK_HOLE), 0).rstrip(b"\0"))
        return -(-used // self.ENTRY.size)

    def _unpack_all(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        if self._entries == 0:
            return (), ()
        assert self._mm is not None
        flat = struct.unpack_from(">" + self.ENTRY_CODES * self._entries, self._mm, 0)
        return flat[0::2], flat[1::2]

    @abc.abstractmethod
    def _sanity_check(self) -> None:
        """Raise CorruptIndexError unless the entries are ordered as the index requires."""

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._size // self.ENTRY.size

    @property
    def is_full(self) -> bool:
        return self._entries >= self.max_entries

    def _entry(self, slot: int) -> tuple[int, int]:
        assert 0 <= slot < self._entries
        return self.ENTRY.unpack_from(self._mm or self._mapped(), slot * self.ENTRY.size)

    def reserve(self, count: int) -> None:
        """Allocate and populate the pages of up to `count` more entries (fewer if the file ends first); raises
        OSError (ENOSPC) rather than let a later write into the mmap die of SIGBUS."""
        assert count >= 0
        size = self._size
        written = self._entries * self.ENTRY.size
        needed = min(size, written + count * self.ENTRY.size)
        if needed <= self._allocated:
            return
        end = min(size, -(-needed // ALLOCATION_CHUNK) * ALLOCATION_CHUNK)
        fd = self._open_file().fileno()
        self._ops.allocate(fd, self._allocated, end - self._allocated)
        start = max(self._allocated, written)  # never over the entries (a reopened file's are not allocated)
        self._ops.populate(fd, start, end - start)
        self._allocated = end

    def _write_entry(self, key: int, value: int) -> None:
        assert not self.is_full
        self.reserve(1)
        self.ENTRY.pack_into(self._mapped(), self._entries * self.ENTRY.size, key, value)
        self._entries += 1
        self._dirty = True

    def _floor_slot(self, target: int, field: int) -> int:
        """Slot of the last entry whose `field` is <= target, or -1."""
        low, high = 0, self._entries
        while low < high:
            mid = (low + high) // 2
            if self._entry(mid)[field] <= target:
                low = mid + 1
            else:
                high = mid
        return low - 1

    def _truncate_entries(self, keep: int) -> None:
        assert 0 <= keep <= self._entries
        if keep == self._entries:
            return
        start, end = keep * self.ENTRY.size, self._entries * self.ENTRY.size
        self._mapped()[start:end] = bytes(end - start)  # zeroed: see the module docstring
        self._entries = keep
        self._dirty = True

    def reset(self) -> None:
        self._truncate_entries(0)

    def trim_to_valid_size(self) -> None:
        self._remap(self._entries * self.ENTRY.size)

    def resize(self, max_bytes: int) -> None:
        """Grow (or shrink, never below the entries) the preallocated file."""
        size = max(self._round(max_bytes), self._entries * self.ENTRY.size)
        self._remap(size)

    def flush(self) -> None:
        if self._mm is not None:
            self._mm.flush()
        elif self._file is None and self._dirty:
            # Released since the last write: its pages are in the page cache, a new descriptor fsyncs them.
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._dirty = False

    def close(self) -> None:
        self.trim_to_valid_size()
        if self._file is not None:
            self._file.close()
            self._file = None

    def delete(self) -> None:
        """Unmap and unlink; the fd closes once no flush ticket holds the file object."""
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        self._entries = 0
        self._size = 0
        self._deleted = True
        self.path.unlink(missing_ok=True)

    @property
    def file(self) -> io.FileIO:
        return self._open_file()


class OffsetIndex(_MmapIndex):
    """8-byte entries: offset relative to the segment base (int32), file position (int32)."""

    ENTRY = struct.Struct(">ii")
    ENTRY_CODES = "ii"

    def _sanity_check(self) -> None:
        relative, positions = self._unpack_all()
        if self._entries and (relative[0] < 0 or positions[0] < 0):
            raise CorruptIndexError(f"{self.path}: negative first entry")
        if not all(map(int.__lt__, relative, relative[1:])):
            raise CorruptIndexError(f"{self.path}: offsets are not strictly increasing")
        if not all(map(int.__lt__, positions, positions[1:])):
            raise CorruptIndexError(f"{self.path}: positions are not strictly increasing")

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        assert 0 <= relative <= INT32_MAX
        assert 0 <= position <= INT32_MAX
        if self._entries:
            last_relative, last_position = self._entry(self._entries - 1)
            assert relative > last_relative, (offset, self.base_offset + last_relative)
            assert position > last_position, (position, last_position)
        self._write_entry(relative, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """Floor entry (offset, position); (base_offset, 0) if there is none."""
        slot = self._floor_slot(offset - self.base_offset, 0)
        if slot < 0:
            return self.base_offset, 0
        relative, position = self._entry(slot)
        return self.base_offset + relative, position

    @property
    def last_entry(self) -> tuple[int, int]:
        if not self._entries:
            return self.base_offset, 0
        relative, position = self._entry(self._entries - 1)
        return self.base_offset + relative, position

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets >= `offset`."""
        self._truncate_entries(self._floor_slot(offset - self.base_offset - 1, 0) + 1)


class TimeIndex(_MmapIndex):
    """12-byte entries: timestamp (int64), offset relative to the segment base (int32).

    An entry (t, o) says no record at an offset <= o has a timestamp above t.
    """

    ENTRY = struct.Struct(">qi")
    ENTRY_CODES = "qi"

    def _sanity_check(self) -> None:
        timestamps, relative = self._unpack_all()
        if self._entries and relative[0] < 0:
            raise CorruptIndexError(f"{self.path}: negative first offset")
        if not all(map(int.__lt__, timestamps, timestamps[1:])):
            raise CorruptIndexError(f"{self.path}: timestamps are not strictly increasing")
        if not all(map(int.__le__, relative, relative[1:])):
            raise CorruptIndexError(f"{self.path}: offsets decrease")

    @property
    def last_entry(self) -> tuple[int, int]:
        if not self._entries:
            return NO_TIMESTAMP, self.base_offset
        timestamp, relative = self._entry(self._entries - 1)
        return timestamp, self.base_offset + relative

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        """Append only if `timestamp` is newer than the last entry's."""
        relative = offset - self.base_offset
        assert 0 <= relative <= INT32_MAX
        if self._entries:
            last_timestamp, last_relative = self._entry(self._entries - 1)
            if timestamp <= last_timestamp:
                return False
            assert relative >= last_relative, (offset, self.base_offset + last_relative)
        if self.is_full:
            return False
        self._write_entry(timestamp, relative)
        return True

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """Largest entry with timestamp <= target; (-1, base_offset) if none."""
        slot = self._floor_slot(timestamp, 0)
        if slot < 0:
            return NO_TIMESTAMP, self.base_offset
        found_timestamp, relative = self._entry(slot)
        return found_timestamp, self.base_offset + relative

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets >= `offset`."""
        self._truncate_entries(self._floor_slot(offset - self.base_offset - 1, 1) + 1)
