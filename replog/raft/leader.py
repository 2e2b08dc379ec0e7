"""What a leader tracks about the other replicas during its epoch (KRaft's LeaderState bookkeeping).

The replicas' fetch offsets give the high watermark (voters only); the times of their fetches give
check-quorum; BeginQuorumEpoch acknowledgements say whom to tell again; fetches that found nothing new are
parked until data or a new high watermark arrives, or their max wait passes.
"""

from __future__ import annotations

from dataclasses import dataclass

from replog.raft.messages import Envelope, ReplicaProgress
from replog.raft.states import CHECK_QUORUM_TIMEOUT_FACTOR, majority_high_watermark


@dataclass(slots=True)
class ReplicaState:
    end_offset: int = 0
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1


class LeaderProgress:
    def __init__(self, local_id: int, voters: frozenset[int], epoch_start_offset: int, fetch_timeout_ms: int,
                 now_ms: int) -> None:
        self.local_id = local_id
        self.voters = voters
        self.epoch_start_offset = epoch_start_offset
        self.replicas: dict[int, ReplicaState] = {voter: ReplicaState() for voter in voters}
        self.begin_epoch_acked: set[int] = {local_id}
        self.parked: dict[int, tuple[Envelope, int]] = {}  # replica id -> (fetch request, answer-by time)
        self._check_quorum_timeout_ms = int(fetch_timeout_ms * CHECK_QUORUM_TIMEOUT_FACTOR)
        self.check_quorum_deadline_ms = now_ms + self._check_quorum_timeout_ms
        self._fetched_since_check: set[int] = {local_id}

    def update_local(self, flushed_end_offset: int, now_ms: int) -> None:
        """The leader counts only what it has flushed: a power loss cannot take back a committed entry."""
        state = self.replicas[self.local_id]
        state.end_offset, state.last_fetch_ms, state.last_caught_up_ms = flushed_end_offset, now_ms, now_ms

    def update_replica(self, replica_id: int, fetch_offset: int, leader_end_offset: int, now_ms: int) -> None:
        """A valid Fetch from `replica_id` at `fetch_offset`: it has everything below it."""
        state = self.replicas.setdefault(replica_id, ReplicaState())
        state.end_offset, state.last_fetch_ms = fetch_offset, now_ms
        if fetch_offset >= leader_end_offset:
            state.last_caught_up_ms = now_ms
        if replica_id in self.voters:
            self.begin_epoch_acked.add(replica_id)
            self._fetched_since_check.add(replica_id)
            if len(self._fetched_since_check) > len(self.voters) // 2:
                self._fetched_since_check = {self.local_id}
                self.check_quorum_deadline_ms = now_ms + self._check_quorum_timeout_ms

    def new_high_watermark(self, current: int | None) -> int | None:
        offsets = {replica: state.end_offset for replica, state in self.replicas.items()}
        return majority_high_watermark(offsets, self.voters, self.epoch_start_offset, current)

    def check_quorum_expired(self, now_ms: int) -> bool:
        """No fetch from a majority for 1.5 fetch timeouts: the leader may be cut off and must resign."""
        return len(self.voters) > 1 and now_ms >= self.check_quorum_deadline_ms

    def progress(self) -> tuple[tuple[ReplicaProgress, ...], tuple[ReplicaProgress, ...]]:
        """(voters, observers) for DescribeQuorum."""
        def describe(replica: int) -> ReplicaProgress:
            state = self.replicas[replica]
            return ReplicaProgress(replica, state.end_offset, state.last_fetch_ms, state.last_caught_up_ms)
        voters = tuple(describe(replica) for replica in sorted(self.voters))
        observers = tuple(describe(replica) for replica in sorted(self.replicas) if replica not in self.voters)
        return voters, observers
