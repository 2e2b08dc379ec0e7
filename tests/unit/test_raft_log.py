"""The quorum's log rules (validate_fetch, truncation_offset) and the in-memory log's power-loss model."""

import pytest

from replog.raft.messages import LogEntry, OffsetAndEpoch
from replog.raft.raft_log import (
    DivergingFetch,
    MemoryRaftLog,
    SnapshotNeeded,
    ValidFetch,
    truncation_offset,
    validate_fetch,
)


def _log(epochs: list[int]) -> MemoryRaftLog:
    log = MemoryRaftLog()
    log.append([LogEntry(epoch, b"%d" % i) for i, epoch in enumerate(epochs)])
    log.flush()
    return log


LEADER = [1, 1, 1, 2, 2, 4, 4, 4]  # epoch 1 is [0, 3), epoch 2 [3, 5), epoch 4 [5, 8)


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [
        (1, OffsetAndEpoch(3, 1)),
        (2, OffsetAndEpoch(5, 2)),
        (3, OffsetAndEpoch(5, 2)),  # no epoch 3: the largest below it, and where it ends
        (4, OffsetAndEpoch(8, 4)),
        (9, OffsetAndEpoch(8, 4)),
        (0, OffsetAndEpoch(0, 0)),  # below every epoch: the log start
    ],
)
def test_end_offset_for_epoch(epoch, expected):
    assert _log(LEADER).end_offset_for_epoch(epoch) == expected


@pytest.mark.parametrize(
    ("fetch_offset", "last_epoch", "expected"),
    [
        (0, 0, ValidFetch()),  # an empty follower
        (3, 1, ValidFetch()),
        (8, 4, ValidFetch()),
        (6, 4, ValidFetch()),
        (4, 1, DivergingFetch(OffsetAndEpoch(3, 1))),  # epoch 1 ends at 3 here
        (6, 3, DivergingFetch(OffsetAndEpoch(5, 2))),  # the follower has an epoch 3 the leader never had
        (9, 4, DivergingFetch(OffsetAndEpoch(8, 4))),  # beyond the leader's end
    ],
)
def test_validate_fetch(fetch_offset, last_epoch, expected):
    assert validate_fetch(_log(LEADER), fetch_offset, last_epoch) == expected


def test_validate_fetch_below_the_snapshot_asks_for_it():
    log = _log(LEADER)
    log.create_snapshot(OffsetAndEpoch(5, 2), b"state")
    assert log.start_offset == 5
    assert validate_fetch(log, 3, 1) == SnapshotNeeded(OffsetAndEpoch(5, 2))
    assert validate_fetch(log, 5, 1) == SnapshotNeeded(OffsetAndEpoch(5, 2))  # at the start, other epoch
    assert validate_fetch(log, 5, 2) == ValidFetch()
    assert validate_fetch(log, 7, 4) == ValidFetch()


@pytest.mark.parametrize(
    ("follower", "diverging", "expected"),
    [
        ([1, 1, 1, 3, 3], OffsetAndEpoch(5, 2), 3),  # no epoch 2 here: keep epoch 1, which ends at 3
        ([1, 1, 1, 2, 2, 2, 2], OffsetAndEpoch(5, 2), 5),  # both have epoch 2: the smaller end
        ([1, 1, 1, 2], OffsetAndEpoch(5, 2), 4),  # the follower's epoch 2 ends first
        ([1, 1, 1, 1, 1], OffsetAndEpoch(3, 1), 3),
        ([3, 3], OffsetAndEpoch(0, 0), 0),
    ],
)
def test_truncation_offset(follower, diverging, expected):
    assert truncation_offset(_log(follower), diverging) == expected


def test_power_loss_keeps_only_the_flushed_prefix():
    log = _log([1, 1])
    log.append([LogEntry(1, b"x"), LogEntry(2, b"y")])
    assert (log.end_offset, log.flushed_end_offset) == (4, 2)
    log.lose_unflushed()
    assert log.end_offset == 2 and log.last_offset_and_epoch() == OffsetAndEpoch(2, 1)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(2, 1)  # epoch 2 went with the tail


def test_truncate_then_append_a_new_epoch():
    log = _log(LEADER)
    log.truncate_to(4)
    log.append([LogEntry(5, b"n")])
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(4, 2)
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(5, 5)
    with pytest.raises(AssertionError):
        log.append([LogEntry(3, b"older epoch")])


def test_snapshot_deletes_the_log_before_it_and_keeps_the_epochs_after():
    log = _log(LEADER)
    log.create_snapshot(OffsetAndEpoch(4, 2), b"state")
    assert (log.start_offset, log.end_offset, log.start_epoch) == (4, 8, 2)
    assert log.read(4, 10)[0] == LogEntry(2, b"4")
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(5, 2)
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(8, 4)
    assert log.latest_snapshot_id() == OffsetAndEpoch(4, 2) and log.read_snapshot(OffsetAndEpoch(4, 2)) == b"state"


def test_install_snapshot_replaces_the_log():
    log = _log([1, 1])
    log.install_snapshot(OffsetAndEpoch(10, 3), b"state")
    assert (log.start_offset, log.end_offset, log.flushed_end_offset) == (10, 10, 10)
    assert log.last_offset_and_epoch() == OffsetAndEpoch(10, 3)
    log.lose_unflushed()
    assert log.end_offset == 10


def test_the_last_flushed_offset_and_epoch_is_what_a_power_loss_leaves():
    log = MemoryRaftLog()
    assert log.last_flushed_offset_and_epoch() == OffsetAndEpoch(0, 0)
    log.append([LogEntry(1, b"a"), LogEntry(2, b"b")])
    assert log.last_flushed_offset_and_epoch() == OffsetAndEpoch(0, 0)
    log.flush()
    log.append([LogEntry(3, b"c")])
    assert log.last_flushed_offset_and_epoch() == OffsetAndEpoch(2, 2)
    log.lose_unflushed()
    assert log.last_offset_and_epoch() == log.last_flushed_offset_and_epoch() == OffsetAndEpoch(2, 2)
