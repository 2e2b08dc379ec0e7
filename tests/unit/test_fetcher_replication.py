"""The real ReplicaFetcher (through ReplicaFetcherManager) against a fake leader over real PartitionLogs:
a follower catches up and converges on the leader's log whatever its own tail holds.

Every scenario ends with the follower's log byte-identical to the leader's: same batches, offsets, log start
and epoch cache.
"""

from __future__ import annotations

from replog.fetcher.fetch_state import FetchPhase

from ..conditions import wait_until
from .fetcher_fake_leader import (
    CONFIG,
    TP,
    FakeLeader,
    append_as_leader,
    append_without_epoch,
    assert_identical,
    cluster,  # noqa: F401 (fixture)
    copy_log,
    follow,
    in_sync,
    open_log,
)


async def test_fresh_follower_catches_up_over_many_rounds(tmp_path, cluster):
    manager, leaders = cluster
    leader = leaders[1] = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    append_as_leader(leader_log, 0, 12)
    append_as_leader(leader_log, 2, 12, tag=b"w")
    leader.lead(TP, leader_log, 2)
    assert leader_log.size_in_bytes > 5 * CONFIG.partition_max_bytes
    follower = open_log(tmp_path, "follower")

    manager.add_partitions(follow(leader, follower, 2))
    await wait_until(lambda: in_sync(follower, leader_log), what="catch-up")

    assert_identical(follower, leader_log)
    assert len(leader.calls_for("fetch", TP)) > 5
    state = manager.fetch_state(TP)
    assert (state.phase, state.fetch_offset, state.last_fetched_epoch) == (FetchPhase.FETCHING, 48, 2)

    # It keeps following: new data arrives without anything being re-added.
    append_as_leader(leader_log, 2, 3, tag=b"x")
    await wait_until(lambda: in_sync(follower, leader_log), what="new data")
    assert_identical(follower, leader_log)


async def test_kip101_divergent_tail_is_truncated_via_diverging_epoch(tmp_path, cluster):
    manager, leaders = cluster
    leader = leaders[1] = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    follower = open_log(tmp_path, "follower")
    append_as_leader(leader_log, 0, 5)
    copy_log(leader_log, follower, 10)
    # The follower led epoch 1 briefly and wrote an uncommitted tail nobody else has...
    append_as_leader(follower, 1, 3, tag=b"f")
    follower.maybe_update_high_watermark(10)
    # ...while the new leader, at epoch 2, wrote different data at those offsets.
    append_as_leader(leader_log, 2, 5, tag=b"L")
    leader.lead(TP, leader_log, 2)
    assert follower.log_end_offset == 16 and follower.epoch_cache.latest_epoch == 1

    manager.add_partitions(follow(leader, follower, 2))
    await wait_until(lambda: in_sync(follower, leader_log), what="convergence")

    assert_identical(follower, leader_log)
    assert leader.calls_for("epochs", TP) == []  # DivergingEpoch alone found the point


async def test_kip279_follower_that_missed_epochs_needs_several_truncation_rounds(tmp_path, cluster):
    manager, leaders = cluster
    leader = leaders[1] = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    follower = open_log(tmp_path, "follower")
    append_as_leader(leader_log, 0, 5)
    copy_log(leader_log, follower, 10)
    # Follower: epochs 1 and 3 it never shared. Leader: epochs 2 and 4 the follower never saw.
    append_as_leader(follower, 1, 5, tag=b"a")
    append_as_leader(follower, 3, 3, tag=b"b")
    append_as_leader(leader_log, 2, 4, tag=b"c")
    append_as_leader(leader_log, 4, 6, tag=b"d")
    leader.lead(TP, leader_log, 4)
    assert follower.epoch_cache.entries() == ((0, 0), (1, 10), (3, 20))
    assert leader_log.epoch_cache.entries() == ((0, 0), (2, 10), (4, 18))

    manager.add_partitions(follow(leader, follower, 4))
    await wait_until(lambda: in_sync(follower, leader_log), what="convergence")

    assert_identical(follower, leader_log)
    # DivergingEpoch(2, 18) cut to 20 and left the partition Truncating; OffsetForLeaderEpoch(1) then answered
    # (0, 10), and the follower cut to 10.
    assert len(leader.calls_for("epochs", TP)) >= 1


async def test_follower_without_epochs_truncates_to_its_high_watermark(tmp_path, cluster):
    manager, leaders = cluster
    leader = leaders[1] = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    follower = open_log(tmp_path, "follower")
    append_without_epoch(leader_log, 5)
    copy_log(leader_log, follower, 10)
    append_without_epoch(follower, 5, tag=b"x")  # beyond the HW and not on the leader
    follower.maybe_update_high_watermark(10)
    append_as_leader(leader_log, 2, 6, tag=b"y")
    leader.lead(TP, leader_log, 2)
    assert follower.epoch_cache.latest_epoch == -1

    manager.add_partitions(follow(leader, follower, 2))
    await wait_until(lambda: in_sync(follower, leader_log), what="convergence")

    assert_identical(follower, leader_log)
    assert leader.calls_for("epochs", TP) == []


async def test_out_of_range_below_leader_log_start_truncates_fully(tmp_path, cluster):
    manager, leaders = cluster
    leader = leaders[1] = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    follower = open_log(tmp_path, "follower")
    append_as_leader(leader_log, 0, 5)
    copy_log(leader_log, follower, 10)
    append_as_leader(leader_log, 0, 20)
    leader_log.maybe_increment_high_watermark(leader_log.log_end_offset)
    leader_log.maybe_increment_log_start_offset(30)
    leader_log.delete_retention_segments()
    leader.lead(TP, leader_log, 0)

    manager.add_partitions(follow(leader, follower, 0))
    await wait_until(lambda: in_sync(follower, leader_log), what="convergence")

    assert follower.log_start_offset == 30
    assert_identical(follower, leader_log)
    assert len(leader.calls_for("list_offsets", TP)) == 2


async def test_out_of_range_past_a_shorter_leader_truncates_to_its_end(tmp_path, cluster):
    manager, leaders = cluster
    leader = leaders[1] = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    follower = open_log(tmp_path, "follower")
    append_without_epoch(leader_log, 5)
    copy_log(leader_log, follower, 10)
    append_without_epoch(follower, 5, tag=b"x")
    follower.maybe_update_high_watermark(16)  # it believed more was committed than the new leader has
    leader.lead(TP, leader_log, 3)

    manager.add_partitions(follow(leader, follower, 3))
    await wait_until(lambda: follower.log_end_offset == 10, what="truncation to the leader's end")
    append_as_leader(leader_log, 3, 4, tag=b"n")
    await wait_until(lambda: in_sync(follower, leader_log), what="convergence")

    assert_identical(follower, leader_log)
    assert len(leader.calls_for("list_offsets", TP)) >= 2
