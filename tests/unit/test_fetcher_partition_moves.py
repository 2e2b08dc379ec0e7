"""The real ReplicaFetcher and ReplicaFetcherManager against fake leaders: partitions added, re-added,
removed and moved between fetchers (a new leader, a new address, a new epoch), and fetchers picked by a
stable id."""

from __future__ import annotations

import asyncio

import pytest

from replog.fetcher.manager import FetcherConfig, FetcherKey, LeaderInfo, ReplicaFetcherManager
from replog.fetcher.replica_fetcher import ReplicaFetcher
from replog.log.partition_log import TopicPartition

from ..conditions import wait_until
from .fetcher_fake_leader import (
    CONFIG,
    TP,
    TP2,
    FakeLeader,
    append_as_leader,
    assert_identical,
    clock_ms,
    cluster,  # noqa: F401 (fixture)
    copy_log,
    follow,
    in_sync,
    open_log,
    two_partitions_behind,
)


@pytest.mark.parametrize("change", ["removed and re-added", "re-added at a new epoch"])
async def test_answer_for_an_older_state_is_dropped(tmp_path, change):
    leader = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    append_as_leader(leader_log, 1, 5)
    leader.lead(TP, leader_log, 1)
    follower = open_log(tmp_path, "follower")
    fetcher = ReplicaFetcher(1, 0, leader.endpoint(CONFIG), CONFIG, clock_ms)
    leader.gate = first_gate = asyncio.Event()
    fetcher.add_partitions(follow(leader, follower, 1))
    fetcher.start()
    try:
        await wait_until(lambda: leader.parked == 1, what="a fetch in flight")
        if change == "removed and re-added":
            fetcher.remove_partitions([TP])
            fetcher.add_partitions(follow(leader, follower, 1))
        else:
            append_as_leader(leader_log, 2, 1, tag=b"e")
            leader.lead(TP, leader_log, 2)
            fetcher.add_partitions(follow(leader, follower, 2))
        leader.gate = asyncio.Event()
        first_gate.set()
        # The next fetch is parked only once the first answer has been handled.
        await wait_until(lambda: leader.parked == 2, what="the next fetch")
        assert follower.log_end_offset == 0
        assert follower.high_watermark == 0
        assert fetcher.fetch_state(TP).fetch_offset == 0

        leader.gate.set()
        leader.gate = None
        await wait_until(lambda: in_sync(follower, leader_log), what="convergence")
        assert_identical(follower, leader_log)
    finally:
        await fetcher.stop()


async def test_leader_change_moves_the_partition_and_stops_the_idle_fetcher(tmp_path, cluster):
    manager, leaders = cluster
    old = leaders[1] = FakeLeader(1, port=9001)
    new = leaders[2] = FakeLeader(2, port=9002)
    old_log = open_log(tmp_path, "old")
    new_log = open_log(tmp_path, "new")
    follower = open_log(tmp_path, "follower")
    append_as_leader(old_log, 1, 6)
    old.lead(TP, old_log, 1)

    manager.add_partitions(follow(old, follower, 1))
    await wait_until(lambda: in_sync(follower, old_log), what="following the first leader")
    key = FetcherKey(1, manager.fetcher_id(TP))
    old_fetcher = manager.fetchers[key]

    copy_log(old_log, new_log, old_log.log_end_offset)
    append_as_leader(new_log, 2, 4, tag=b"n")
    new.lead(TP, new_log, 2)
    old.logs.clear()  # the old leader is gone
    manager.add_partitions(follow(new, follower, 2))

    assert list(manager.fetchers) == [FetcherKey(2, manager.fetcher_id(TP))]
    await manager.settle()
    assert not old_fetcher.running
    assert old_fetcher.partition_count == 0
    await wait_until(lambda: in_sync(follower, new_log), what="following the new leader")
    assert_identical(follower, new_log)


async def test_partitions_spread_over_fetchers_by_a_stable_id(tmp_path):
    config = FetcherConfig(
        replica_id=7, num_fetchers=3, max_wait_ms=10, backoff_ms=60, request_timeout_ms=1_000
    )
    leader = FakeLeader(1)
    manager = ReplicaFetcherManager(config, lambda info, fetcher_id: leader.endpoint(config), clock_ms)
    tps = [TopicPartition("t", p) for p in range(12)]
    try:
        partitions = {}
        for tp in tps:
            log = open_log(tmp_path, "leader", tp)
            append_as_leader(log, 0, 1)
            leader.lead(tp, log, 0)
            partitions.update(follow(leader, open_log(tmp_path, "follower", tp), 0, tp))
        manager.add_partitions(partitions)
        assert {key.fetcher_id for key in manager.fetchers} == {0, 1, 2}
        assert sum(f.partition_count for f in manager.fetchers.values()) == len(tps)
        assert [manager.fetcher_id(tp) for tp in tps[:4]] == [2, 2, 0, 2]  # crc32: the same in every process
        await wait_until(
            lambda: all(in_sync(p.log, leader.logs[tp]) for tp, p in partitions.items()), what="all in sync"
        )
        removed = manager.remove_partitions(tps)
        await manager.settle()
        assert set(removed) == set(tps)
        assert manager.fetchers == {}
    finally:
        await manager.shutdown()


async def test_re_adding_at_the_same_epoch_keeps_the_fetch_state(tmp_path, cluster):
    manager, leaders = cluster
    leader = leaders[1] = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    append_as_leader(leader_log, 0, 3)
    leader.lead(TP, leader_log, 0)
    follower = open_log(tmp_path, "follower")
    manager.add_partitions(follow(leader, follower, 0))
    await wait_until(lambda: in_sync(follower, leader_log), what="catch-up")
    before = manager.fetch_state(TP)
    manager.add_partitions(follow(leader, follower, 0))
    assert manager.fetch_state(TP) is before


async def test_a_leader_at_a_new_address_gets_a_new_fetcher_with_all_its_partitions(tmp_path, cluster):
    manager, leaders = cluster
    leader = leaders[1] = FakeLeader(1, port=9001)
    partitions = two_partitions_behind(tmp_path, leader, records=3)
    manager.add_partitions(partitions)
    await wait_until(
        lambda: all(in_sync(p.log, leader.logs[tp]) for tp, p in partitions.items()), what="sync"
    )
    ((key, old_fetcher),) = manager.fetchers.items()

    leader.info = LeaderInfo(1, "127.0.0.1", 9003)  # restarted on another port
    manager.add_partitions(follow(leader, partitions[TP].log, 0, TP))
    await manager.settle()

    new_fetcher = manager.fetchers[key]
    assert new_fetcher is not old_fetcher and not old_fetcher.running
    assert new_fetcher.partition_count == 2  # TP2 moved along
    for tp in (TP, TP2):
        append_as_leader(leader.logs[tp], 0, 2, tag=b"z")
    await wait_until(
        lambda: all(in_sync(p.log, leader.logs[tp]) for tp, p in partitions.items()), what="sync"
    )
    for tp, initial in partitions.items():
        assert_identical(initial.log, leader.logs[tp])


async def test_a_partition_added_during_a_parked_fetch_is_fetched_without_waiting_for_it(tmp_path):
    """A failover makes this broker the follower of partitions whose new leader it already fetches from; their
    first fetch must not wait out the fetch parked there (replica.fetch.wait.max.ms, behind which the leader
    would queue the next request on the connection): the parked one is abandoned on a fresh connection."""
    leader = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    append_as_leader(leader_log, 1, 2)
    leader.lead(TP, leader_log, 1)
    new_log = open_log(tmp_path, "leader", TP2)
    append_as_leader(new_log, 1, 3)
    leader.lead(TP2, new_log, 1)
    follower, new_follower = open_log(tmp_path, "follower"), open_log(tmp_path, "follower", TP2)
    endpoint = leader.endpoint(CONFIG)
    fetcher = ReplicaFetcher(1, 0, endpoint, CONFIG, clock_ms)
    fetcher.add_partitions(follow(leader, follower, 1))
    fetcher.start()
    try:
        await wait_until(lambda: in_sync(follower, leader_log), what="following the first partition")
        leader.gate = asyncio.Event()  # held shut: the fetch in flight never answers by itself
        await wait_until(lambda: leader.parked == 1, what="a parked fetch")
        fetcher.add_partitions(follow(leader, new_follower, 1, TP2))

        await wait_until(lambda: leader.calls_for("fetch", TP2), what="a fetch with the new partition")
        assert endpoint.closed, "the abandoned request's connection is closed, not reused"
        assert leader.parked == 2
        assert follower.log_end_offset == leader_log.log_end_offset  # nothing of the abandoned fetch applied

        leader.gate.set()
        leader.gate = None
        await wait_until(lambda: in_sync(new_follower, new_log), what="the new partition caught up")
        assert_identical(new_follower, new_log)
        assert_identical(follower, leader_log)
    finally:
        await fetcher.stop()
