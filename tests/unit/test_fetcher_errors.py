"""The real ReplicaFetcher and ReplicaFetcherManager against a fake leader that fails: retriable partition
errors and connection failures back off (replica.fetch.backoff.ms) and recover, a fenced partition waits to
be added again, and a bug in the fetch loop surfaces."""

from __future__ import annotations

import dataclasses

import pytest
from kio.schema.errors import ErrorCode

from replog.fetcher.replica_fetcher import ReplicaFetcher

from ..conditions import wait_until
from .fetcher_fake_leader import (
    CONFIG,
    TP,
    TP2,
    FakeLeader,
    FakeLeaderEndpoint,
    append_as_leader,
    assert_identical,
    clock_ms,
    cluster,  # noqa: F401 (fixture)
    fetchers_with_fake_leaders,
    follow,
    in_sync,
    open_log,
    two_partitions_behind,
)

# Long enough that the other partition's next fetch, which leaves as soon as the first answer is handled,
# falls inside the pause even when a loaded machine delays the loop by tens of milliseconds.
LONG_BACKOFF = dataclasses.replace(CONFIG, backoff_ms=600)


async def test_retriable_errors_back_off_one_partition_while_others_go_on(tmp_path):
    async with fetchers_with_fake_leaders(LONG_BACKOFF) as (manager, leaders):
        leader = leaders[1] = FakeLeader(1)
        partitions = two_partitions_behind(tmp_path, leader, records=4)
        leader.injected_errors[TP] = [ErrorCode.unknown_leader_epoch, ErrorCode.not_leader_or_follower]

        manager.add_partitions(partitions)
        await wait_until(
            lambda: all(in_sync(p.log, leader.logs[tp]) for tp, p in partitions.items()), what="sync"
        )

        for tp, initial in partitions.items():
            assert_identical(initial.log, leader.logs[tp])
        fetches = leader.calls_for("fetch", TP)
        # The two errored fetches were each followed by a pause of replica.fetch.backoff.ms...
        assert fetches[1] - fetches[0] >= LONG_BACKOFF.backoff_ms / 1000 * 0.9
        assert fetches[2] - fetches[1] >= LONG_BACKOFF.backoff_ms / 1000 * 0.9
        # ...during which the other partition kept fetching.
        assert any(fetches[0] < at < fetches[1] for at in leader.calls_for("fetch", TP2)), leader.calls


async def test_connection_failure_backs_off_every_partition_and_recovers(tmp_path, cluster):
    manager, leaders = cluster
    leader = leaders[1] = FakeLeader(1)
    partitions = two_partitions_behind(tmp_path, leader, records=4)
    leader.failing_requests = 2

    manager.add_partitions(partitions)
    await wait_until(
        lambda: all(in_sync(p.log, leader.logs[tp]) for tp, p in partitions.items()), what="sync"
    )

    for tp, initial in partitions.items():
        assert_identical(initial.log, leader.logs[tp])
    fetches = [at for kind, at, _ in leader.calls if kind == "fetch"]
    assert fetches[1] - fetches[0] >= CONFIG.backoff_ms / 1000 * 0.9
    assert fetches[2] - fetches[1] >= CONFIG.backoff_ms / 1000 * 0.9
    assert leader.calls[0][2] == leader.calls[2][2] == frozenset({TP, TP2})


async def test_fenced_partition_waits_to_be_added_again(tmp_path, cluster):
    manager, leaders = cluster
    leader = leaders[1] = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    append_as_leader(leader_log, 3, 4)
    leader.lead(TP, leader_log, 3)
    follower = open_log(tmp_path, "follower")

    manager.add_partitions(follow(leader, follower, 2))  # our epoch is already stale
    await wait_until(lambda: TP in manager.failed_partitions, what="the partition to fail")
    assert manager.fetch_state(TP) is None
    assert follower.log_end_offset == 0

    manager.add_partitions(follow(leader, follower, 3))
    assert TP not in manager.failed_partitions
    await wait_until(lambda: in_sync(follower, leader_log), what="convergence")
    assert_identical(follower, leader_log)


async def test_a_bug_in_the_loop_is_not_swallowed(tmp_path):
    class BrokenEndpoint(FakeLeaderEndpoint):
        async def fetch(self, partitions):
            raise RuntimeError("bug")

    leader = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    leader.lead(TP, leader_log, 0)
    endpoint = BrokenEndpoint(leader, CONFIG)
    fetcher = ReplicaFetcher(1, 0, endpoint, CONFIG, clock_ms)
    fetcher.add_partitions(follow(leader, open_log(tmp_path, "follower"), 0))
    fetcher.start()
    await wait_until(lambda: not fetcher.running, what="the loop to die")
    with pytest.raises(RuntimeError, match="bug"):
        await fetcher.stop()
    assert endpoint.closed
