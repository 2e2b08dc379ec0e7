"""What a leader tracks about the other replicas during its epoch (KRaft's LeaderState bookkeeping).

The replicas' fetch offsets give the high watermark (voters only); the times of their fetches give
check-quorum; BeginQuorumEpoch acknowledgements say whom to tell again; fetches that found nothing new are
parked until data or a new high watermark arrives, or their max wait passes.
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from replog.raft import messages as m
from replog.raft.messages import Envelope, ReplicaProgress
from replog.raft.raft_log import DivergingFetch, RaftLog, SnapshotNeeded, validate_fetch
from replog.raft.snapshots import MAX_SNAPSHOT_CHUNK_BYTES, snapshot_chunk
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
        self._started_ms = now_ms

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

    def silent_voters(self, now_ms: int, fetch_timeout_ms: int) -> set[int]:
        """Voters other than the leader that have not fetched for a fetch timeout."""
        return {voter for voter in self.voters if voter != self.local_id
                and now_ms - max(self.replicas[voter].last_fetch_ms, self._started_ms) >= fetch_timeout_ms}

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


def fetch_answer(log: RaftLog, request: m.FetchRequest, leader_id: int, epoch: int, high_watermark: int | None,
                 max_entries: int) -> m.FetchResponse:
    """The leader's answer to a Fetch at `request.fetch_offset`: DivergingEpoch, SnapshotId, or records."""
    answer = dict(error_code=ErrorCode.none, leader_id=leader_id, leader_epoch=epoch,
                  high_watermark=-1 if high_watermark is None else high_watermark, log_start_offset=log.start_offset)
    check = validate_fetch(log, request.fetch_offset, request.last_fetched_epoch)
    if isinstance(check, DivergingFetch):
        return m.FetchResponse(**answer, diverging_epoch=check.diverging_epoch)
    if isinstance(check, SnapshotNeeded):
        return m.FetchResponse(**answer, snapshot_id=check.snapshot_id)
    return m.FetchResponse(**answer, records=log.read(request.fetch_offset, max_entries))


def fetch_snapshot_answer(data: bytes, request: m.FetchSnapshotRequest, leader_id: int,
                          epoch: int) -> m.FetchSnapshotResponse:
    """One chunk of the snapshot `data` from `request.position`; a position past the end is out of range."""
    if not 0 <= request.position < max(len(data), 1):
        return m.FetchSnapshotResponse(ErrorCode.position_out_of_range, leader_id, epoch, request.snapshot_id,
                                       len(data), request.position, b"")
    chunk = snapshot_chunk(data, request.position, min(request.max_bytes, MAX_SNAPSHOT_CHUNK_BYTES))
    return m.FetchSnapshotResponse(ErrorCode.none, leader_id, epoch, request.snapshot_id, len(data),
                                   request.position, chunk)
