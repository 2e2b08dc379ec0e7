"""Which followed partitions a fetcher's next round fetches, truncates or leaves waiting: kept up to date from
the partitions whose state changed, so a round costs what changed, not how many partitions are followed.

Every new fetch state of a partition marks it (FollowedPartition.state); `FetchPlan.update` re-plans only the
marked ones, those whose back-off has ended (a heap of deadlines), and every partition once per
FULL_REPLAN_MS, because a log start offset, sent with each fetch, also moves by local retention, which marks
nothing. Sans-IO: the clock is an argument; the order of everything planned is the partitions' sort order.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from replog.fetcher.fetch_state import FetchPhase, PartitionFetchState
from replog.fetcher.leader_endpoint import FetchRequestPartition, FetchRequests
from replog.log.partition_log import PartitionLog, TopicPartition

FULL_REPLAN_MS = 1_000


class FollowedPartition:
    """A followed partition: its fetch state (each new one marks the partition for the next plan) and its log."""

    __slots__ = ("tp", "_state", "log", "in_sync", "_plan")

    def __init__(self, tp: TopicPartition, state: PartitionFetchState, log: PartitionLog, plan: FetchPlan) -> None:
        self.tp = tp
        self.log = log
        # Reached the leader's HW at the last fetch (Kafka's PartitionFetchState.isReplicaInSync, lag <= 0):
        # the follower throttle never holds back a replica that keeps up.
        self.in_sync = False
        self._plan = plan
        self.state = state

    @property
    def state(self) -> PartitionFetchState:
        return self._state

    @state.setter
    def state(self, state: PartitionFetchState) -> None:
        self._state = state
        self._plan.mark(self.tp)


class FetchPlan:
    """The fetch request's entry of each partition ready to fetch (and the state it was built from), the
    partitions ready to truncate, and (back-off deadline, partition) for those waiting."""

    def __init__(self, partition_max_bytes: int, full_replan_ms: int = FULL_REPLAN_MS) -> None:
        self._partition_max_bytes = partition_max_bytes
        self._full_replan_ms = full_replan_ms
        self._marked: set[TopicPartition] = set()
        self.states: dict[TopicPartition, PartitionFetchState] = {}
        self.requests = FetchRequests({}, set())
        self.truncating: set[TopicPartition] = set()
        self._delayed: list[tuple[int, TopicPartition]] = []  # a heap; an entry may be stale (re-planned since)
        self._next_full_ms: int | None = None
        self.partitions_planned = 0  # every partition each update looked at: the work that scales
        self.updates = 0
        # Partitions whose `requests` entry was added, replaced or removed since take_moved (KIP-227: what
        # the next incremental fetch may have to send or forget; the others are as last sent).
        self._moved: set[TopicPartition] = set()

    def mark(self, tp: TopicPartition) -> None:
        """Re-plan `tp` at the next update: its state, or what its request carries, changed (or it is gone)."""
        self._marked.add(tp)

    def leave_out(self, tp: TopicPartition) -> None:
        """Not fetched by the round being built (a throttled partition, marked by its new back-off)."""
        self.states.pop(tp, None)
        if self.requests.pop(tp, None) is not None:
            self._moved.add(tp)

    def take_moved(self) -> set[TopicPartition]:
        """The partitions whose request entry changed since the last call (the request being built from
        `requests` now is compared with the one built then on these only)."""
        moved, self._moved = self._moved, set()
        return moved

    def take_request(self) -> FetchRequests:
        """The request entries of the round being sent, with the partitions moved since the last round's.

        `requests` itself, as are `states` for the answer: not copies, for the plan changes only in update
        and leave_out, which the fetcher calls between rounds, never while a round awaits its answer (a
        copy of each per round was 2 us at 333 partitions a fetcher, 52 us at 3,333).
        """
        self.requests.moved = self.take_moved()
        return self.requests

    @property
    def next_deadline_ms(self) -> int | None:
        """When the earliest back-off ends (or a stale entry says it might)."""
        return self._delayed[0][0] if self._delayed else None

    def update(self, now_ms: int, partitions: Mapping[TopicPartition, FollowedPartition]) -> None:
        """Re-plan the marked partitions, those whose back-off has ended, and all of `partitions` once per
        full re-plan interval."""
        self.updates += 1
        while self._delayed and self._delayed[0][0] <= now_ms:
            self._marked.add(heapq.heappop(self._delayed)[1])
        if self._next_full_ms is None or now_ms >= self._next_full_ms:
            self._marked.update(partitions)
            self._marked.update(self.states)  # and any no longer followed that a change failed to mark
            self._marked.update(self.truncating)
            self._next_full_ms = now_ms + self._full_replan_ms
        self.partitions_planned += len(self._marked)
        # Sorted: the request's order must not depend on hashing, so a simulation seed replays identically.
        for tp in sorted(self._marked):
            followed = partitions.get(tp)
            state = None if followed is None else followed.state
            if (state is not None and self.states.get(tp) is state and not state.is_delayed(now_ms)
                    and self.requests[tp].log_start_offset == followed.log.log_start_offset):
                continue  # as planned: the entry stays the same object
            self.leave_out(tp)
            self.truncating.discard(tp)
            if state is None:
                continue
            if state.is_delayed(now_ms):
                heapq.heappush(self._delayed, (state.delayed_until_ms, tp))
            elif state.phase is FetchPhase.TRUNCATING:
                self.truncating.add(tp)
            else:
                self.states[tp] = state
                self.requests[tp] = FetchRequestPartition(
                    state.fetch_offset, state.current_leader_epoch, state.last_fetched_epoch,
                    followed.log.log_start_offset, self._partition_max_bytes)
                self._moved.add(tp)
        self._marked.clear()
