"""A follower's next fetch leaves as soon as the answer before it is appended (issue 18, item 3): the fetch
loop goes straight from appending to the next request, with no wait for work, back-off or timer between."""

from __future__ import annotations

import asyncio

from replog.fetcher.replica_fetcher import ReplicaFetcher

from .fetcher_fake_leader import (
    CONFIG,
    TP,
    FakeLeader,
    FakeLeaderEndpoint,
    append_as_leader,
    clock_ms,
    follow,
    open_log,
)

# Event-loop turns the fetcher may take between an answer and its next request: a request is enqueued, then
# written by a call_soon, so a few turns; any wait on a timer or an event would need the loop to idle.
MAX_TURNS = 20


class ParksAfterTheFirstAnswer(FakeLeaderEndpoint):
    """Answers the first fetch with the leader's data at once; later fetches record their offsets and park,
    as a leader parks a fetch with nothing new to read."""

    def __init__(self, leader: FakeLeader) -> None:
        super().__init__(leader, CONFIG)
        self.fetch_offsets: list[int] = []
        self._parked = asyncio.Event()  # never set: nothing more comes

    async def fetch(self, partitions):
        self.fetch_offsets.append(partitions[TP].fetch_offset)
        if len(self.fetch_offsets) == 1:
            return {TP: self.leader.read(TP, partitions[TP], CONFIG.max_bytes, first=True)}
        await self._parked.wait()
        raise AssertionError("unreachable")


async def test_the_next_fetch_leaves_in_the_turns_after_the_append_without_waiting(tmp_path):
    leader = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    leader.lead(TP, leader_log, 0)
    append_as_leader(leader_log, 0, 1)
    endpoint = ParksAfterTheFirstAnswer(leader)
    fetcher = ReplicaFetcher(1, 0, endpoint, CONFIG, clock_ms)
    follower_log = open_log(tmp_path, "follower")
    follower_log.epoch_cache.assign(0, 0)  # same history as the leader: no truncation round first
    fetcher.add_partitions(follow(leader, follower_log, 0))
    waits = []
    real_wait = fetcher._wait_for_work

    async def recorded_wait():
        waits.append(len(endpoint.fetch_offsets))
        await real_wait()

    fetcher._wait_for_work = recorded_wait
    fetcher.start()
    try:
        for _ in range(MAX_TURNS):
            if len(endpoint.fetch_offsets) >= 2:
                break
            await asyncio.sleep(0)
        assert endpoint.fetch_offsets == [0, leader_log.log_end_offset]
        assert follower_log.log_end_offset == leader_log.log_end_offset
        assert waits == [], "the loop waited for work between an answer with data and its next fetch"
    finally:
        await fetcher.stop()


class AnswersWhenReleased(FakeLeaderEndpoint):
    """Answers the first fetch with the leader's data once the test releases it; later fetches record their
    offsets and park."""

    def __init__(self, leader: FakeLeader) -> None:
        super().__init__(leader, CONFIG)
        self.fetch_offsets: list[int] = []
        self.release = asyncio.get_running_loop().create_future()
        self._parked = asyncio.Event()  # never set: nothing more comes

    async def fetch(self, partitions):
        self.fetch_offsets.append(partitions[TP].fetch_offset)
        if len(self.fetch_offsets) == 1:
            await self.release
            return {TP: self.leader.read(TP, partitions[TP], CONFIG.max_bytes, first=True)}
        await self._parked.wait()
        raise AssertionError("unreachable")


async def test_the_next_fetch_is_made_in_the_loop_turn_that_appends_the_answer(tmp_path):
    """The rounds run back to back in one task: no task is made or awaited between an append and the next
    fetch, which cost two loop turns per round (each turn first serves whatever other I/O is ready)."""
    leader = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    leader.lead(TP, leader_log, 0)
    append_as_leader(leader_log, 0, 1)
    endpoint = AnswersWhenReleased(leader)
    fetcher = ReplicaFetcher(1, 0, endpoint, CONFIG, clock_ms)
    follower_log = open_log(tmp_path, "follower")
    follower_log.epoch_cache.assign(0, 0)  # same history as the leader: no truncation round first
    fetcher.add_partitions(follow(leader, follower_log, 0))
    fetcher.start()
    try:
        for _ in range(MAX_TURNS):
            if endpoint.fetch_offsets:
                break
            await asyncio.sleep(0)
        assert endpoint.fetch_offsets == [0]
        endpoint.release.set_result(None)  # the answer arrives
        await asyncio.sleep(0)  # one loop turn: the round wakes, appends, and the next round fetches
        assert follower_log.log_end_offset == leader_log.log_end_offset
        assert endpoint.fetch_offsets == [0, leader_log.log_end_offset]
    finally:
        await fetcher.stop()
