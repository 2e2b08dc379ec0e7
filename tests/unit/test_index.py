import pytest

from replog.log.errors import CorruptIndexError
from replog.log.index import OffsetIndex, TimeIndex


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
