import errno
import mmap

import pytest

from replog.log.errors import CorruptIndexError
from replog.log.index import IndexFileOps, OffsetIndex, TimeIndex


class RecordingIndexFileOps(IndexFileOps):
    """Records the (offset, length) of every allocate and populate; fails allocate with ENOSPC if told to."""

    def __init__(self, *, disk_full: bool = False) -> None:
        self.allocated: list[tuple[int, int]] = []
        self.populated: list[tuple[int, int]] = []
        self.disk_full = disk_full

    def allocate(self, fd: int, offset: int, length: int) -> None:
        if self.disk_full:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.allocated.append((offset, length))
        super().allocate(fd, offset, length)

    def populate(self, fd: int, offset: int, length: int) -> None:
        self.populated.append((offset, length))
        super().populate(fd, offset, length)

    def populated_up_to(self, start: int = 0) -> int:
        """The end of the contiguous populated range from `start`."""
        end = start
        for offset, length in sorted(self.populated):
            if offset <= end:
                end = max(end, offset + length)
        return end


def test_offset_index_append_lookup(tmp_path):
    index = OffsetIndex(tmp_path / "0.index", 100, 1000)
    assert index.max_entries == 125
    assert index.lookup(150) == (100, 0)
    for i in range(1, 11):
        index.append(100 + 10 * i, 1000 * i)
    assert index.entries == 10
    assert index.lookup(99) == (100, 0)
    assert index.lookup(110) == (110, 1000)
    assert index.lookup(119) == (110, 1000)
    assert index.lookup(10_000) == (200, 10_000)
    with pytest.raises(AssertionError):
        index.append(200, 20_000)  # offsets must increase


def test_offset_index_max_bytes_rounded_down(tmp_path):
    index = OffsetIndex(tmp_path / "0.index", 0, 20)
    assert index.max_entries == 2
    index.append(1, 1)
    index.append(2, 2)
    assert index.is_full


def test_offset_index_truncate_then_append(tmp_path):
    index = OffsetIndex(tmp_path / "0.index", 0, 800)
    for i in range(1, 6):
        index.append(i * 10, i * 100)
    index.truncate_to(30)
    assert index.entries == 2
    assert index.lookup(45) == (20, 200)
    index.truncate_to(21)
    assert index.entries == 2
    index.append(25, 250)
    assert index.lookup(1000) == (25, 250)


def test_offset_index_reopen_preallocated_and_trimmed(tmp_path):
    path = tmp_path / "0.index"
    index = OffsetIndex(path, 5, 800)
    for i in range(1, 4):
        index.append(5 + i, i * 64)
    index.truncate_to(8)  # the dropped entry is zeroed, so reopening ignores it
    index.flush()
    assert path.stat().st_size == 800  # preallocated
    reopened = OffsetIndex(path, 5, 800)
    assert reopened.entries == 2
    assert reopened.lookup(100) == (7, 128)
    reopened.close()
    assert path.stat().st_size == 16  # trimmed on close
    again = OffsetIndex(path, 5, 800)
    assert again.entries == 2
    assert again.is_full  # a trimmed index must be resized before appending
    again.resize(800)
    again.append(9, 500)
    assert again.lookup(9) == (9, 500)


def test_offset_index_corrupt_size(tmp_path):
    path = tmp_path / "0.index"
    path.write_bytes(b"\1" * 13)
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, 800)


def test_offset_index_corrupt_order(tmp_path):
    path = tmp_path / "0.index"
    path.write_bytes(bytes.fromhex("00000005 00000010 00000003 00000020".replace(" ", "")))
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, 800)


def test_time_index(tmp_path):
    path = tmp_path / "0.timeindex"
    index = TimeIndex(path, 0, 120)
    assert index.lookup(5) == (-1, 0)
    assert index.maybe_append(100, 3)
    assert not index.maybe_append(100, 4)  # timestamps must grow
    assert index.maybe_append(200, 9)
    assert index.maybe_append(300, 12)
    assert index.lookup(99) == (-1, 0)
    assert index.lookup(100) == (100, 3)
    assert index.lookup(250) == (200, 9)
    assert index.lookup(10**12) == (300, 12)
    index.truncate_to(10)
    assert index.last_entry == (200, 9)
    index.close()
    reopened = TimeIndex(path, 0, 120)
    assert reopened.entries == 2
    assert reopened.lookup(10**12) == (200, 9)


def test_time_index_corrupt(tmp_path):
    path = tmp_path / "0.timeindex"
    path.write_bytes(bytes.fromhex("0000000000000064 00000003 0000000000000010 00000004".replace(" ", "")))
    with pytest.raises(CorruptIndexError):
        TimeIndex(path, 0, 120)


def test_index_pages_are_populated_before_entries_go_in_through_the_map(tmp_path):
    # A page first touched through the mapping is a slow page fault on the event loop (IndexFileOps.populate):
    # every entry must land in a page written with pwrite beforehand, one populate per page, not per entry.
    ops = RecordingIndexFileOps()
    index = OffsetIndex(tmp_path / "0.index", 0, 10 * mmap.PAGESIZE, create_lazily=True, file_ops=ops)
    entries_per_page = mmap.PAGESIZE // OffsetIndex.ENTRY.size
    for i in range(1, 2 * entries_per_page + 2):
        index.append(i, i * 10)
        assert ops.populated_up_to() >= index.entries * OffsetIndex.ENTRY.size
    assert ops.populated == [(page * mmap.PAGESIZE, mmap.PAGESIZE) for page in range(3)]
    assert ops.allocated == ops.populated


def test_time_index_pages_are_populated_before_entries_go_in(tmp_path):
    ops = RecordingIndexFileOps()
    index = TimeIndex(tmp_path / "0.timeindex", 0, 4 * mmap.PAGESIZE, create_lazily=True, file_ops=ops)
    for i in range(1, mmap.PAGESIZE // TimeIndex.ENTRY.size + 2):
        assert index.maybe_append(1000 + i, i)
        assert ops.populated_up_to() >= index.entries * TimeIndex.ENTRY.size
    assert len(ops.populated) == 2


def test_populating_a_reopened_index_keeps_its_entries(tmp_path):
    # A preallocated file left by a crash: its blocks are not known to be allocated, but populating must
    # start after the entries, whose bytes it would otherwise zero.
    path = tmp_path / "0.index"
    index = OffsetIndex(path, 0, 800)
    for i in range(1, 4):
        index.append(i, i * 64)
    index.flush()
    ops = RecordingIndexFileOps()
    reopened = OffsetIndex(path, 0, 800, file_ops=ops)
    reopened.append(4, 256)
    assert ops.allocated == [(0, 800)]
    assert ops.populated == [(24, 800 - 24)]
    assert [reopened.lookup(i) for i in range(1, 5)] == [(1, 64), (2, 128), (3, 192), (4, 256)]
    reopened.flush()
    assert OffsetIndex(path, 0, 800).entries == 4


def test_index_on_a_full_disk_raises_before_writing_an_entry(tmp_path):
    index = OffsetIndex(tmp_path / "0.index", 0, 800, create_lazily=True,
                        file_ops=RecordingIndexFileOps(disk_full=True))  # fmt: skip
    with pytest.raises(OSError) as raised:
        index.append(1, 10)
    assert raised.value.errno == errno.ENOSPC
    assert index.entries == 0
