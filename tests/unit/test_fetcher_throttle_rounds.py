"""The follower throttle in the fetcher's rounds (KIP-73): asked per partition only while its rate is over the
bound, so a round beside many followed partitions does not visit each of them for a throttle that holds
nothing back (docs/profiles/partition-scaling.md, session 13)."""

from __future__ import annotations

from replog.fetcher.manager import InitialFetchState
from replog.fetcher.replication_quota import ReplicationQuota
from replog.log.partition_log import TopicPartition

from ..conditions import wait_until
from .fetcher_fake_leader import (
    CONFIG,
    TP,
    FakeLeader,
    append_as_leader,
    fetchers_with_fake_leaders,
    idle_partitions_beside_tp,
    in_sync,
    open_log,
)

OTHER = TopicPartition("other", 0)


class CountingQuota(ReplicationQuota):
    """A real quota on a clock the test moves, counting the per-partition questions asked of it."""

    def __init__(self) -> None:
        self.now = [0]
        super().__init__(lambda: self.now[0], windows=2)
        self.partitions_asked = 0

    def throttles(self, topic: str, partition: int, *, in_sync: bool) -> bool:
        self.partitions_asked += 1
        return super().throttles(topic, partition, in_sync=in_sync)


async def test_rounds_under_the_rate_ask_the_throttle_about_no_partition(tmp_path):
    quota = CountingQuota()
    quota.configure(10**9, {"idle": {"k": "*"}, TP.topic: {"k": "*"}}, "k", CONFIG.replica_id)
    async with fetchers_with_fake_leaders(quota=quota) as (manager, leaders):
        leader = leaders[1] = FakeLeader(1)
        tps, leader_logs, follower_logs = idle_partitions_beside_tp(tmp_path, leader, manager, 200)
        for _ in range(10):
            append_as_leader(leader_logs[TP], 0, 1)
            await wait_until(lambda: all(in_sync(follower_logs[tp], leader_logs[tp]) for tp in tps),
                             what="every partition replicated")
        assert len(leader.calls_for("fetch", TP)) >= 10
        assert quota.partitions_asked == 0


async def test_over_the_rate_a_throttled_replica_out_of_sync_is_still_held_back(tmp_path):
    quota = CountingQuota()
    quota.configure(1, {TP.topic: {"k": "*"}}, "k", CONFIG.replica_id)
    quota.record(10**6)  # far over 1 B/s until the test moves the clock on
    async with fetchers_with_fake_leaders(quota=quota) as (manager, leaders):
        leader = leaders[1] = FakeLeader(1)
        leader_logs = {tp: open_log(tmp_path, "leader", tp) for tp in (TP, OTHER)}
        follower_logs = {tp: open_log(tmp_path, "follower", tp) for tp in (TP, OTHER)}
        for tp in (TP, OTHER):
            append_as_leader(leader_logs[tp], 0, 3)
            leader.lead(tp, leader_logs[tp], 0)
        manager.add_partitions({tp: InitialFetchState(None, leader.info, 0, follower_logs[tp])
                                for tp in (TP, OTHER)})
        await wait_until(lambda: in_sync(follower_logs[OTHER], leader_logs[OTHER]), what="the unthrottled partition")
        await wait_until(lambda: quota.partitions_asked >= 3, what="rounds asking about the throttled one")
        assert leader.calls_for("fetch", TP) == []
        assert follower_logs[TP].log_end_offset == 0
        quota.now[0] += 60_000  # the recorded bytes leave the windows: back under the rate
        await wait_until(lambda: in_sync(follower_logs[TP], leader_logs[TP]), what="the throttled partition")
