"""A fetch round sends the fetch plan's own request dict, not a copy of every partition followed (a copy per
round was 2 us at 333 partitions a fetcher, 52 us at 3,333: docs/profiles/partition-cost.md, session 14)."""

from __future__ import annotations

from ..conditions import wait_until
from .fetcher_fake_leader import (
    TP,
    FakeLeader,
    append_as_leader,
    fetchers_with_fake_leaders,
    idle_partitions_beside_tp,
    in_sync,
)


async def test_every_round_sends_the_plans_request_dict_and_replicates_what_each_asked(tmp_path):
    async with fetchers_with_fake_leaders() as (manager, leaders):
        leader = leaders[1] = FakeLeader(1)
        sent = []
        record = leader.record
        leader.record = lambda kind, tps: (kind == "fetch" and sent.append(tps)) or record(kind, tps)
        tps, leader_logs, follower_logs = idle_partitions_beside_tp(tmp_path, leader, manager, 200)
        for _ in range(5):
            append_as_leader(leader_logs[TP], 0, 1)
            await wait_until(lambda: all(in_sync(follower_logs[tp], leader_logs[tp]) for tp in tps),
                             what="every partition replicated")
        assert len(sent) >= 5
        assert all(request is sent[0] for request in sent)
        assert len(sent[0]) == len(tps)  # the 200 idle partitions and TP, all still wanted
