"""KIP-630 snapshot policy and the follower's FetchSnapshot reassembly."""

import pytest

from replog.raft.messages import OffsetAndEpoch
from replog.raft.snapshots import SnapshotDownload, SnapshotPolicy, snapshot_chunk

SNAPSHOT = OffsetAndEpoch(100, 4)


@pytest.mark.parametrize(
    ("records", "size", "due"),
    [(0, 0, False), (9, 999, False), (10, 0, True), (0, 1000, True)],
)
def test_policy_is_due_after_records_or_bytes(records, size, due):
    assert SnapshotPolicy(max_records=10, max_bytes=1000).due(records, size) is due


def test_chunks_cover_the_data_in_order():
    data = bytes(range(10))
    assert [snapshot_chunk(data, position, 4) for position in (0, 4, 8)] == [data[:4], data[4:8], data[8:]]


def test_download_accepts_chunks_in_order_only():
    download = SnapshotDownload(SNAPSHOT)
    assert download.accept(SNAPSHOT, 10, 0, b"abcd") and not download.complete
    assert not download.accept(SNAPSHOT, 10, 0, b"abcd")  # a duplicate
    assert not download.accept(SNAPSHOT, 10, 8, b"ij")  # a gap
    assert not download.accept(OffsetAndEpoch(100, 5), 10, 4, b"efgh")  # another snapshot
    assert not download.accept(SNAPSHOT, 12, 4, b"efgh")  # the size changed
    assert not download.accept(SNAPSHOT, 10, 4, b"efghijk")  # past the size
    assert download.accept(SNAPSHOT, 10, 4, b"efgh") and download.accept(SNAPSHOT, 10, 8, b"ij")
    assert download.complete and bytes(download.received) == b"abcdefghij"


def test_download_refuses_an_absurd_size():
    assert not SnapshotDownload(SNAPSHOT).accept(SNAPSHOT, 1 << 40, 0, b"x")
