"""The fetcher's plan (replog.fetcher.fetch_plan): a round re-plans the partitions whose state changed, not
every followed partition; counted with FetchPlan.partitions_planned. Table tests with stand-in logs, then the
real fetcher against a fake leader over real logs."""

from __future__ import annotations

import dataclasses

import pytest

from replog.fetcher.fetch_plan import FULL_REPLAN_MS, FetchPlan, FollowedPartition
from replog.fetcher.fetch_state import FetchPhase, PartitionFetchState
from replog.log.partition_log import TopicPartition

from ..conditions import wait_until
from .fetcher_fake_leader import (
    TP,
    FakeLeader,
    append_as_leader,
    clock_ms,
    fetchers_with_fake_leaders,
    idle_partitions_beside_tp,
    in_sync,
)

MAX_BYTES = 1 << 20


@dataclasses.dataclass
class StubLog:
    log_start_offset: int = 0


def _state(offset=0, *, phase=FetchPhase.FETCHING, delayed_until_ms=0) -> PartitionFetchState:
    return PartitionFetchState(None, offset, 1, None, phase, 0, delayed_until_ms)


def _followed(plan: FetchPlan, count: int) -> dict[TopicPartition, FollowedPartition]:
    tps = [TopicPartition("idle", i) for i in range(count)]
    return {tp: FollowedPartition(tp, _state(), StubLog(), plan) for tp in tps}


def test_an_update_after_one_change_re_plans_that_partition_only():
    plan = FetchPlan(MAX_BYTES)
    partitions = _followed(plan, 1000)
    plan.update(0, partitions)
    assert plan.partitions_planned == 1000 and len(plan.requests) == 1000
    unchanged = dict(plan.requests)
    busy = TopicPartition("idle", 7)
    partitions[busy].state = _state(offset=5)  # an append moved its fetch offset
    plan.update(1, partitions)
    assert plan.partitions_planned == 1001
    assert plan.requests[busy].fetch_offset == 5 and plan.states[busy].fetch_offset == 5
    # The other entries are the very objects sent before: the session handler compares them by identity.
    assert all(plan.requests[tp] is entry for tp, entry in unchanged.items() if tp != busy)
    plan.update(2, partitions)
    assert plan.partitions_planned == 1001, "nothing changed: nothing re-planned"


def test_a_back_off_leaves_the_request_until_its_deadline_without_a_mark():
    plan = FetchPlan(MAX_BYTES)
    partitions = _followed(plan, 3)
    tp = TopicPartition("idle", 1)
    partitions[tp].state = _state(delayed_until_ms=100)
    plan.update(0, partitions)
    assert tp not in plan.requests and plan.next_deadline_ms == 100
    plan.update(99, partitions)
    assert tp not in plan.requests
    partitions[tp]._state = _state()  # as if its back-off simply ended: no new state is set
    plan.update(100, partitions)
    assert tp in plan.requests and plan.next_deadline_ms is None
    assert plan.partitions_planned == 3 + 1


@pytest.mark.parametrize(("phase", "fetchable", "truncating"), [
    (FetchPhase.FETCHING, True, False),
    (FetchPhase.TRUNCATING, False, True),
])
def test_each_partition_is_fetched_or_truncated(phase, fetchable, truncating):
    plan = FetchPlan(MAX_BYTES)
    partitions = _followed(plan, 1)
    tp = TopicPartition("idle", 0)
    partitions[tp].state = _state(phase=phase)
    plan.update(0, partitions)
    assert (tp in plan.requests, tp in plan.truncating) == (fetchable, truncating)


def test_a_removed_partition_leaves_the_plan_once_marked():
    plan = FetchPlan(MAX_BYTES)
    partitions = _followed(plan, 2)
    plan.update(0, partitions)
    tp = TopicPartition("idle", 0)
    del partitions[tp]
    plan.mark(tp)
    plan.update(1, partitions)
    assert tp not in plan.requests and tp not in plan.states


def test_the_full_re_plan_drops_a_partition_no_longer_followed_even_unmarked():
    plan = FetchPlan(MAX_BYTES)
    partitions = _followed(plan, 2)
    plan.update(0, partitions)
    del partitions[TopicPartition("idle", 0)]
    plan.update(FULL_REPLAN_MS, partitions)
    assert list(plan.requests) == [TopicPartition("idle", 1)]


def test_a_log_start_moved_by_retention_is_sent_after_the_full_re_plan():
    plan = FetchPlan(MAX_BYTES)
    partitions = _followed(plan, 1000)
    plan.update(0, partitions)
    tp = TopicPartition("idle", 3)
    partitions[tp].log.log_start_offset = 40  # local retention marks nothing
    plan.update(FULL_REPLAN_MS - 1, partitions)
    assert plan.requests[tp].log_start_offset == 0 and plan.partitions_planned == 1000
    before = dict(plan.requests)
    plan.update(FULL_REPLAN_MS, partitions)
    assert plan.requests[tp].log_start_offset == 40 and plan.partitions_planned == 2000
    assert sum(plan.requests[other] is not entry for other, entry in before.items()) == 1, "the rest kept"


async def test_rounds_beside_idle_partitions_re_plan_only_the_busy_one(tmp_path):
    """The real fetcher against a fake leader: 200 caught-up idle partitions and one busy one. While the busy
    one replicates 10 appends, the rounds re-plan it (and the once-a-second full re-plan), not all 201 each."""
    async with fetchers_with_fake_leaders() as (manager, leaders):
        leader = leaders[1] = FakeLeader(1)
        tps, leader_logs, follower_logs = idle_partitions_beside_tp(tmp_path, leader, manager, 200)
        await wait_until(lambda: all(in_sync(follower_logs[tp], leader_logs[tp]) for tp in tps), what="catch-up")
        (fetcher,) = manager.fetchers.values()
        planned, rounds = fetcher.partitions_planned, len(leader.calls_for("fetch", TP))
        started = clock_ms()
        for _ in range(10):
            append_as_leader(leader_logs[TP], 0, 1)
            await wait_until(lambda: in_sync(follower_logs[TP], leader_logs[TP]), what="the busy partition")
        rounds = len(leader.calls_for("fetch", TP)) - rounds
        full_re_plans = (clock_ms() - started) // FULL_REPLAN_MS + 1
        assert rounds >= 10
        assert fetcher.partitions_planned - planned <= 2 * rounds + full_re_plans * len(tps)
        assert fetcher.partitions_planned - planned < rounds * len(tps) / 4


def test_the_moved_partitions_are_those_whose_request_entry_was_added_replaced_or_removed():
    plan = FetchPlan(MAX_BYTES)
    partitions = _followed(plan, 1000)
    plan.update(0, partitions)
    assert len(plan.take_moved()) == 1000  # all added
    busy, backing_off = TopicPartition("idle", 7), TopicPartition("idle", 8)
    partitions[busy].state = _state(offset=5)
    partitions[backing_off].state = _state(delayed_until_ms=100)
    plan.update(1, partitions)
    assert plan.take_moved() == {busy, backing_off}
    plan.update(2, partitions)
    assert plan.take_moved() == set(), "nothing changed: nothing to compare"
    plan.leave_out(busy)  # a throttled partition, left out of the round being built
    plan.leave_out(busy)
    assert plan.take_moved() == {busy}
    before = dict(plan.requests)
    plan.update(FULL_REPLAN_MS, partitions)  # re-plans every partition, keeps the unchanged entries
    assert {tp for tp in plan.requests if before.get(tp) is not plan.requests[tp]} == {busy, backing_off}
    assert plan.take_moved() == {busy, backing_off}  # back in the round, its back-off over
