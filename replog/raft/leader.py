"""A leader's epoch (KRaft's LeaderState): LeaderRole does the leader's work, LeaderProgress keeps what it
knows about the other replicas.

The replicas' fetch offsets give the high watermark (voters only); the times of their fetches give
check-quorum; BeginQuorumEpoch acknowledgements say whom to tell again; fetches that found nothing new are
parked until data or a new high watermark arrives, or their max wait passes.
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from replog.raft import messages as m
from replog.raft.config import QuorumConfig
from replog.raft.messages import Envelope, LogEntry, ReplicaProgress
from replog.raft.raft_log import DivergingFetch, RaftLog, SnapshotNeeded, validate_fetch
from replog.raft.requests import RequestChannel
from replog.raft.snapshots import MAX_SNAPSHOT_CHUNK_BYTES, snapshot_chunk
from replog.raft.states import CHECK_QUORUM_TIMEOUT_FACTOR, majority_high_watermark

APPEND_LINGER_MS = 25  # controller.quorum.append.linger.ms: a leader batches appends this long before a flush


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


class LeaderRole:
    """The leader's work in its epoch: appends flushed after the linger, the high watermark, Fetch answered or
    parked, BeginQuorumEpoch to the voters, check-quorum. Sends through the node's channel."""

    def __init__(self, local_id: int, epoch: int, config: QuorumConfig, log: RaftLog, channel: RequestChannel,
                 cluster_id: str, high_watermark: int | None, now_ms: int) -> None:
        self.local_id, self.epoch, self.config, self.log = local_id, epoch, config, log
        self._channel, self._cluster_id = channel, cluster_id
        self.progress = LeaderProgress(local_id, config.voter_ids, log.end_offset, config.fetch_timeout_ms, now_ms)
        self.high_watermark = high_watermark  # kept from before: a high watermark never goes down
        self.flush_due_ms: int | None = None

    def deadlines(self) -> list[int]:
        # Check-quorum needs other voters (check_quorum_expired): a lone leader's deadline, never moved on,
        # would be in the past after one timeout and wake the shell at every turn of the event loop.
        times = [self.progress.check_quorum_deadline_ms] if len(self.progress.voters) > 1 else []
        times.extend(deadline for _, deadline in self.progress.parked.values())
        if self.flush_due_ms is not None:
            times.append(self.flush_due_ms)
        return times

    def append(self, entries: list[LogEntry], now_ms: int) -> None:
        """Append now; flush (and so wake parked fetches) after the linger, batching close appends."""
        self.log.append(entries)
        if self.flush_due_ms is None:
            self.flush_due_ms = now_ms + APPEND_LINGER_MS

    def tick(self, now_ms: int) -> bool:
        """Flush, expire parked fetches, tell voters of the epoch; True when check-quorum says resign."""
        if self.flush_due_ms is not None and now_ms >= self.flush_due_ms:
            self.log.flush()
            self.flush_due_ms = None
            self.progress.update_local(self.log.flushed_end_offset, now_ms)
            self._maybe_advance_high_watermark()
            self._complete_parked_fetches()
        if self.progress.check_quorum_expired(now_ms):
            return True
        for replica, (_, deadline) in list(self.progress.parked.items()):
            if now_ms >= deadline:
                request, _ = self.progress.parked.pop(replica)
                self._channel.respond(request, self._fetch_answer(request.message))
        self.send_begin_quorum_epoch(now_ms)
        return False

    def send_begin_quorum_epoch(self, now_ms: int) -> None:
        """BeginQuorumEpoch to the voters that have not acknowledged it, and again to those that stopped
        fetching: one that moved to a higher epoch (a candidate that lost) cannot win pre-votes while this
        leader is heard, and learns nothing from it unless told; its answer shows this leader the epoch."""
        begin = m.BeginQuorumEpochRequest(self._cluster_id, self.local_id, self.epoch)
        silent = self.progress.silent_voters(now_ms, self.config.fetch_timeout_ms)
        for voter in sorted((self.config.voter_ids - self.progress.begin_epoch_acked) | silent):
            self._channel.send(voter, begin, now_ms)

    def on_fetch(self, envelope: Envelope, request: m.FetchRequest, now_ms: int) -> None:
        """A Fetch of this epoch: answer it, or park it while there is nothing new to send."""
        answer = self._fetch_answer(request)
        if answer.diverging_epoch is None and answer.snapshot_id is None:
            self.progress.update_replica(request.replica_id, request.fetch_offset, self.log.end_offset, now_ms)
            self._maybe_advance_high_watermark()
            hw = -1 if self.high_watermark is None else self.high_watermark
            answer = m.FetchResponse(answer.error_code, answer.leader_id, answer.leader_epoch, hw,
                                     answer.log_start_offset, answer.records)
            if not answer.records and request.max_wait_ms > 0:
                self.progress.parked[request.replica_id] = (envelope, now_ms + request.max_wait_ms)
                return
        self._channel.respond(envelope, answer)

    def describe(self) -> m.DescribeQuorumResponse:
        voters, observers = self.progress.progress()
        hw = -1 if self.high_watermark is None else self.high_watermark
        return m.DescribeQuorumResponse(ErrorCode.none, self.local_id, self.epoch, hw, voters, observers)

    def preferred_successors(self) -> tuple[int, ...]:
        """The other voters, the most caught up first (EndQuorumEpoch's PreferredSuccessors)."""
        replicas = self.progress.replicas
        return tuple(sorted(self.config.voter_ids - {self.local_id},
                            key=lambda voter: (-replicas[voter].end_offset, voter)))

    def take_parked(self) -> list[Envelope]:
        """The parked fetches, for a leader that steps down to answer them."""
        parked, self.progress.parked = self.progress.parked, {}
        return [request for request, _ in parked.values()]

    def _maybe_advance_high_watermark(self) -> None:
        new = self.progress.new_high_watermark(self.high_watermark)
        if new is not None:
            self.high_watermark = new
            self._complete_parked_fetches()

    def _complete_parked_fetches(self) -> None:
        for request in self.take_parked():
            self._channel.respond(request, self._fetch_answer(request.message))

    def _fetch_answer(self, request: m.FetchRequest) -> m.FetchResponse:
        return fetch_answer(self.log, request, self.local_id, self.epoch, self.high_watermark,
                            self.config.fetch_max_entries)
