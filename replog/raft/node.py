"""RaftNode: one member of the quorum (KafkaRaftClient's logic without its I/O).

Feed it `handle(envelope, now_ms)` for every message that arrives and `tick(now_ms)` at `next_deadline_ms()`;
both return the envelopes to send. The leader takes `propose(values)`; every node hands the committed
entries, in order, to `take_committed()`. The quorum state is written to the store BEFORE the node acts on a
new epoch or vote, so a restart can neither vote twice in an epoch nor forget the epoch it was in.
"""

from __future__ import annotations

import random
from dataclasses import replace

from kio.schema.errors import ErrorCode

from replog.raft import messages as m
from replog.raft import states as s
from replog.raft.commits import CommitQueue, Committed, LoadSnapshot
from replog.raft.config import BOOTSTRAP_SERVERS, VOTERS, QuorumConfig, QuorumConfigError
from replog.raft.follower import FollowerRole
from replog.raft.leader import LeaderRole, fetch_snapshot_answer
from replog.raft.messages import NO_LEADER, Envelope, LogEntry, OffsetAndEpoch
from replog.raft.quorum_state_file import QuorumStateStore, check_voters
from replog.raft.raft_log import RaftLog
from replog.raft.requests import RequestChannel
from replog.raft.states import (
    Candidate,
    Follower,
    Leader,
    Prospective,
    QuorumState,
    Resigned,
    Unattached,
    Voted,
)


class NotLeaderError(Exception):
    pass


class RaftNode:
    def __init__(self, node_id: int, config: QuorumConfig, log: RaftLog, store: QuorumStateStore,
                 rng: random.Random, now_ms: int, cluster_id: str = "replog") -> None:
        if not config.voter_ids:
            raise QuorumConfigError(f"{VOTERS} is empty: a quorum found only through {BOOTSTRAP_SERVERS} "
                                    f"(KIP-853 dynamic voters) is not supported yet")
        self.node_id = node_id
        self.config = config
        self.voters = config.voter_ids
        self.is_voter = node_id in self.voters
        self.cluster_id = cluster_id
        self.log = log
        self._store = store
        self._rng = rng
        self._channel = RequestChannel(node_id, config.request_timeout_ms)
        self._leader: LeaderRole | None = None  # while this node leads
        self._end_epoch_acked: set[int] = set()  # voters that acknowledged this resigned leader's EndQuorumEpoch
        self._commits = CommitQueue(log)
        self._follower = FollowerRole(node_id, cluster_id, config, log, self._channel, self._commits, rng)
        saved = store.read()
        check_voters(saved, self.voters, f"node {node_id} quorum-state")
        self.state: QuorumState = s.restart_state(
            saved, log.last_offset_and_epoch().epoch, node_id, self.voters, now_ms,
            lambda: now_ms + self._election_timeout(), now_ms + config.fetch_timeout_ms)
        self._store.write(s.election_state(self.state, node_id, self.voters))
        if self.is_voter and len(self.voters) == 1 and not isinstance(self.state, Candidate | Leader):
            self._become_candidate(now_ms, retries=1)
        elif isinstance(self.state, Candidate):
            self._send_vote_requests(now_ms)

    # ------------------------------------------------------------------ views

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def role(self) -> s.Role:
        return self.state.role

    @property
    def high_watermark(self) -> int | None:
        """Offsets below it are committed; the leader computes it, a follower learns it from the leader."""
        return self._leader.high_watermark if self._leader is not None else self._follower.high_watermark

    @property
    def leader_id(self) -> int | None:
        return s.leader_id_of(self.state, self.node_id)

    def next_deadline_ms(self) -> int:
        """When `tick` has something to do next (a timer, a flush, a resend, a parked fetch's max wait)."""
        times: list[int] = []
        if (timer := s.timer_deadline_ms(self.state)) is not None:
            times.append(timer)
        if isinstance(self.state, Follower) and not self._channel.is_waiting_for(self.state.leader_id):
            times.append(self._follower.retry_at_ms)
        if isinstance(self.state, Unattached) and not self.is_voter and self._channel.idle:
            times.append(self._follower.retry_at_ms)  # an observer looks for the leader
        if (expiry := self._channel.next_expiry_ms()) is not None:
            times.append(expiry)
        if self._leader is not None:
            times.extend(self._leader.deadlines())
        return min(times) if times else 1 << 62

    # ------------------------------------------------------------------ inputs

    def propose(self, values: list[bytes], now_ms: int) -> int:
        """Append `values` in this leader's epoch; returns the offset of the last one. Nothing is sent until
        the flush (see `next_deadline_ms`)."""
        if not isinstance(self.state, Leader):
            raise NotLeaderError(f"node {self.node_id} is {self.role.value} in epoch {self.epoch}")
        assert values
        assert self._leader is not None
        self._leader.append([LogEntry(self.epoch, value) for value in values], now_ms)
        return self.log.end_offset - 1

    def handle(self, envelope: Envelope, now_ms: int) -> list[Envelope]:
        message = envelope.message
        if isinstance(message, m.VoteRequest):
            self._on_vote_request(envelope, message, now_ms)
        elif isinstance(message, m.BeginQuorumEpochRequest):
            self._on_begin_quorum_epoch(envelope, message, now_ms)
        elif isinstance(message, m.EndQuorumEpochRequest):
            self._on_end_quorum_epoch(envelope, message, now_ms)
        elif isinstance(message, m.FetchRequest):
            self._on_fetch_request(envelope, message, now_ms)
        elif isinstance(message, m.FetchSnapshotRequest):
            self._on_fetch_snapshot_request(envelope, message, now_ms)
        elif isinstance(message, m.DescribeQuorumRequest):
            self._on_describe_quorum(envelope)
        elif (answered := self._channel.take_answered(envelope)) is not None:
            if isinstance(message, m.VoteResponse):
                self._on_vote_response(envelope.source, message, now_ms)
            elif isinstance(message, m.FetchResponse):
                self._on_fetch_response(envelope, message, answered.fetch_offset, now_ms)
            elif isinstance(message, m.FetchSnapshotResponse):
                self._on_fetch_snapshot_response(message, now_ms)
            else:
                self._on_quorum_epoch_response(envelope.source, message, now_ms)
        return self._channel.drain()

    def tick(self, now_ms: int) -> list[Envelope]:
        self._channel.expire(now_ms)
        state = self.state
        if isinstance(state, Leader):
            assert self._leader is not None
            if self._leader.tick(now_ms):  # check-quorum: cut off from a majority, it must not linger
                self._resign(now_ms, ())
        elif isinstance(state, Prospective):
            if now_ms >= state.election_deadline_ms:
                self._after_lost_pre_vote(state, now_ms)
            else:
                self._send_vote_requests(now_ms)
        elif isinstance(state, Candidate):
            if state.backoff_until_ms is not None:
                if now_ms >= state.backoff_until_ms:
                    self._stand(now_ms, state.retries + 1)
            elif now_ms >= state.election_deadline_ms:
                self._start_backoff(state, now_ms)
            else:
                self._send_vote_requests(now_ms)
        elif isinstance(state, Follower):
            if now_ms >= state.fetch_deadline_ms:
                if self.is_voter:
                    self._stand(now_ms, retries=1)
                else:
                    self._transition(Unattached(state.epoch, None), now_ms)
            else:
                self._follower.maybe_fetch(state, now_ms)
        elif isinstance(state, Resigned):
            if now_ms >= state.election_deadline_ms:
                self._stand(now_ms, retries=1)
            else:
                end = m.EndQuorumEpochRequest(self.cluster_id, self.node_id, state.epoch, state.preferred_successors)
                for voter in sorted(self.voters - {self.node_id} - self._end_epoch_acked):
                    self._channel.send(voter, end, now_ms)
        elif self.is_voter:  # Unattached or Voted
            if now_ms >= state.election_deadline_ms:
                self._stand(now_ms, retries=1)
        elif self._channel.idle and now_ms >= self._follower.retry_at_ms:
            self._follower.probe_for_leader(self.epoch, self.voters, now_ms)
        return self._channel.drain()

    def take_committed(self) -> list[Committed | LoadSnapshot]:
        """What the state machine applies next: a snapshot to load first if any, then committed entries."""
        return self._commits.take(self.log, self.high_watermark)

    def create_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Keep a snapshot of the state machine at `snapshot_id` (committed, applied) and trim the log."""
        assert self.high_watermark is not None
        assert snapshot_id.offset <= min(self.high_watermark, self._commits.next_offset)
        self.log.create_snapshot(snapshot_id, data)

    # ------------------------------------------------------------------ transitions

    def _election_timeout(self) -> int:
        return s.random_election_timeout_ms(self._rng, self.config.election_timeout_ms)

    def _unattached(self, epoch: int, now_ms: int, delay_ms: int | None = None) -> Unattached:
        """QuorumState.transitionToUnattached: a voter that was waiting for an election keeps its timer, so
        a candidate that keeps losing (and raising the epoch) cannot keep the others from standing."""
        if not self.is_voter:
            return Unattached(epoch, None)
        if delay_ms is not None:
            return Unattached(epoch, now_ms + delay_ms)
        if (isinstance(self.state, Unattached | Voted | Prospective | Candidate)
                and self.state.election_deadline_ms is not None):
            return Unattached(epoch, self.state.election_deadline_ms)
        return Unattached(epoch, now_ms + self._election_timeout())

    def _transition(self, new: QuorumState, now_ms: int) -> None:
        """Persist the election state first, then act: a crash in between leaves the safe, newer record."""
        old = self.state
        assert new.epoch >= old.epoch, (old, new)
        if s.election_state(new, self.node_id, self.voters) != s.election_state(old, self.node_id, self.voters):
            self._store.write(s.election_state(new, self.node_id, self.voters))
        self.state = new
        if type(new) is not type(old) or new.epoch != old.epoch:
            self._channel.forget_all()
            self._follower.new_role_or_epoch()
            self._end_epoch_acked.clear()
        if s.leader_id_of(new, self.node_id) != s.leader_id_of(old, self.node_id) or new.epoch != old.epoch:
            self._follower.heard_from_leader_ms = None
        if isinstance(old, Leader) and not isinstance(new, Leader):
            self._step_down_as_leader()
        if isinstance(new, Follower):
            self._follower.maybe_fetch(new, now_ms)  # pull replication: the follower's first fetch is what the leader waits for

    def _observe(self, epoch: int, leader_id: int, now_ms: int) -> bool:
        """Follow news of a higher epoch, or of this epoch's leader; True when the state changed."""
        if epoch > self.epoch:
            if leader_id != NO_LEADER:
                self._transition(Follower(epoch, leader_id, now_ms + self.config.fetch_timeout_ms), now_ms)
            else:
                self._transition(self._unattached(epoch, now_ms), now_ms)
            return True
        if epoch == self.epoch and leader_id not in (NO_LEADER, self.node_id) and isinstance(
                self.state, Unattached | Voted | Prospective | Candidate) and leader_id != getattr(
                self.state, "leader_id", None):  # a prospective gave up on its leader; others may not have yet
            self._transition(Follower(epoch, leader_id, now_ms + self.config.fetch_timeout_ms), now_ms)
            return True
        return False

    def _stand(self, now_ms: int, retries: int) -> None:
        """An election timer fired: pre-votes first (KIP-996), or straight to candidacy without them."""
        if self.config.pre_vote:
            self._become_prospective(now_ms, retries)
        else:
            self._become_candidate(now_ms, retries)

    def _become_prospective(self, now_ms: int, retries: int) -> None:
        """Ask for pre-votes in this epoch first (KIP-996); only a majority of them makes a candidate. The
        epoch's leader or vote is kept (a resigned leader's is itself, a lost candidate's vote its own)."""
        saved = s.election_state(self.state, self.node_id, self.voters)
        self._transition(Prospective(self.epoch, frozenset({self.node_id}), frozenset(), retries,
                                     now_ms + self._election_timeout(), saved.leader_id, saved.voted_id), now_ms)
        self._send_vote_requests(now_ms)

    def _after_lost_pre_vote(self, state: Prospective, now_ms: int) -> None:
        self._transition(s.after_lost_pre_vote(state, self.node_id, lambda: now_ms + self._election_timeout(),
                                               now_ms + self.config.fetch_timeout_ms), now_ms)

    def _become_candidate(self, now_ms: int, retries: int) -> None:
        assert self.is_voter
        self._transition(Candidate(self.epoch + 1, frozenset({self.node_id}), frozenset(), retries,
                                   now_ms + self._election_timeout()), now_ms)
        if s.won_election(self.state.granted, self.voters):
            self._become_leader(now_ms)
        else:
            self._send_vote_requests(now_ms)

    def _start_backoff(self, state: Candidate, now_ms: int) -> None:
        backoff = s.binary_exponential_backoff_ms(self._rng, state.retries, self.config.election_backoff_max_ms)
        self.state = replace(state, backoff_until_ms=now_ms + backoff)  # same election state: nothing to save

    def _become_leader(self, now_ms: int) -> None:
        self._transition(Leader(self.epoch, self.log.end_offset), now_ms)
        self._leader = LeaderRole(self.node_id, self.epoch, self.config, self.log, self._channel, self.cluster_id,
                                  self._follower.high_watermark, now_ms)
        # KRaft's LeaderChange control record: the first entry of the epoch. Nothing before it counts as
        # committed until it is, so entries of older epochs are committed only by the new leader's own.
        value = b"LeaderChange leader=%d epoch=%d" % (self.node_id, self.epoch)
        self._leader.append([LogEntry(self.epoch, value, control=True)], now_ms)
        self._leader.send_begin_quorum_epoch(now_ms)

    def _resign(self, now_ms: int, preferred_successors: tuple[int, ...]) -> None:
        self._transition(Resigned(self.epoch, now_ms + self._election_timeout(), preferred_successors), now_ms)

    def resign(self, now_ms: int) -> list[Envelope]:
        """Graceful resignation (a controlled shutdown): voters that are caught up are asked to stand first."""
        if isinstance(self.state, Leader) and self._leader is not None:
            self._resign(now_ms, self._leader.preferred_successors())
        return self._channel.drain()

    def _step_down_as_leader(self) -> None:
        """Keep the high watermark; answer parked fetches, so their followers learn of the change at once."""
        assert self._leader is not None
        parked = self._leader.take_parked()
        self._follower.high_watermark, self._leader = self._leader.high_watermark, None
        for request in parked:
            self._channel.respond(request, self._fetch_error(ErrorCode.not_leader_or_follower))

    # ------------------------------------------------------------------ requests

    def _common_request_error(self, envelope: Envelope, cluster_id: str, epoch: int, sender_must_vote: bool,
                              ) -> ErrorCode | None:
        return s.request_error(cluster_id == self.cluster_id,
                               envelope.source in self.voters and self.is_voter or not sender_must_vote,
                               epoch, self.epoch)

    def _on_vote_request(self, envelope: Envelope, request: m.VoteRequest, now_ms: int) -> None:
        error = self._common_request_error(envelope, request.cluster_id, request.candidate_epoch, True)
        # Vote v0 has no VoterId (-1): only a request that names another voter is misdirected.
        if error is None and (request.candidate_id != envelope.source or request.voter_id not in (-1, self.node_id)):
            error = ErrorCode.inconsistent_voter_set
        if error is not None:
            self._channel.respond(envelope, m.VoteResponse(error, self._leader_or_none(), self.epoch, False))
            return
        candidate_last = OffsetAndEpoch(request.last_offset, request.last_offset_epoch)
        if request.pre_vote:  # changes nothing here; a candidate a step behind learns our epoch from the answer
            heard_ms = self._follower.heard_from_leader_ms
            heard = heard_ms is not None and now_ms - heard_ms < self.config.fetch_timeout_ms
            granted = request.candidate_epoch > self.epoch and s.may_grant_pre_vote(
                self.state, candidate_last, self.log.last_offset_and_epoch(), heard)
            self._channel.respond(envelope, m.VoteResponse(ErrorCode.none, self._leader_or_none(), self.epoch, granted))
            return
        if request.candidate_epoch > self.epoch:
            self._transition(self._unattached(request.candidate_epoch, now_ms), now_ms)
        granted = s.may_grant_vote(self.state, request.candidate_id, candidate_last,
                                   self.log.last_offset_and_epoch())
        if granted and isinstance(self.state, Unattached | Prospective):
            self._transition(Voted(self.epoch, request.candidate_id, self.state.election_deadline_ms), now_ms)
        self._channel.respond(envelope, m.VoteResponse(ErrorCode.none, self._leader_or_none(), self.epoch, granted))

    def _on_begin_quorum_epoch(self, envelope: Envelope, request: m.BeginQuorumEpochRequest, now_ms: int) -> None:
        error = self._common_request_error(envelope, request.cluster_id, request.leader_epoch, True)
        if error is None and request.leader_id != envelope.source:
            error = ErrorCode.inconsistent_voter_set
        if error is None:
            if request.leader_epoch == self.epoch and isinstance(self.state, Leader | Resigned):
                raise AssertionError(f"node {self.node_id} led epoch {self.epoch}, node {request.leader_id} claims it")
            if not (isinstance(self.state, Follower) and self.state.epoch == request.leader_epoch):
                follower = Follower(request.leader_epoch, request.leader_id, now_ms + self.config.fetch_timeout_ms)
                self._transition(follower, now_ms)
        self._channel.respond(envelope, m.BeginQuorumEpochResponse(error or ErrorCode.none, self._leader_or_none(), self.epoch))

    def _on_end_quorum_epoch(self, envelope: Envelope, request: m.EndQuorumEpochRequest, now_ms: int) -> None:
        error = self._common_request_error(envelope, request.cluster_id, request.leader_epoch, True)
        if error is None and self.is_voter:
            successors = request.preferred_successors
            position = successors.index(self.node_id) if self.node_id in successors else -1
            backoff = s.strict_exponential_backoff_ms(position, self.config.election_backoff_max_ms)
            if request.leader_epoch > self.epoch:
                self._transition(self._unattached(request.leader_epoch, now_ms, delay_ms=backoff), now_ms)
            elif isinstance(self.state, Follower) and self.state.leader_id == request.leader_id:
                deadline = min(self.state.fetch_deadline_ms, now_ms + backoff)
                self.state = replace(self.state, fetch_deadline_ms=deadline, leader_resigned=True)
        self._channel.respond(envelope, m.EndQuorumEpochResponse(error or ErrorCode.none, self._leader_or_none(), self.epoch))

    def _on_fetch_request(self, envelope: Envelope, request: m.FetchRequest, now_ms: int) -> None:
        error = self._common_request_error(envelope, request.cluster_id, request.current_leader_epoch, False)
        if error is None and request.current_leader_epoch > self.epoch:
            error = ErrorCode.unknown_leader_epoch
        if error is None and not isinstance(self.state, Leader):
            error = ErrorCode.not_leader_or_follower
        if error is None and request.replica_id != envelope.source:
            error = ErrorCode.invalid_request
        if error is not None:
            self._channel.respond(envelope, self._fetch_error(error))
            return
        assert self._leader is not None
        self._leader.on_fetch(envelope, request, now_ms)

    def _on_fetch_snapshot_request(self, envelope: Envelope, request: m.FetchSnapshotRequest, now_ms: int) -> None:
        error = self._common_request_error(envelope, request.cluster_id, request.current_leader_epoch, False)
        if error is None and not isinstance(self.state, Leader):
            error = ErrorCode.not_leader_or_follower
        if error is None and request.snapshot_id != self.log.latest_snapshot_id():
            error = ErrorCode.snapshot_not_found
        if error is not None:
            answer = m.FetchSnapshotResponse(error, self._leader_or_none(), self.epoch, request.snapshot_id, 0,
                                             request.position, b"")
        else:
            answer = fetch_snapshot_answer(self.log.read_snapshot(request.snapshot_id), request, self.node_id,
                                           self.epoch)
        self._channel.respond(envelope, answer)

    def _on_describe_quorum(self, envelope: Envelope) -> None:
        if self._leader is None:
            answer = m.DescribeQuorumResponse(ErrorCode.not_leader_or_follower, self._leader_or_none(), self.epoch,
                                              -1, (), ())
        else:
            answer = self._leader.describe()
        self._channel.respond(envelope, answer)

    # ------------------------------------------------------------------ responses

    def _on_vote_response(self, source: int, response: m.VoteResponse, now_ms: int) -> None:
        if self._observe(response.leader_epoch, response.leader_id, now_ms):
            return
        state = self.state
        if (source not in self.voters or not isinstance(state, Candidate | Prospective)
                or response.leader_epoch != state.epoch or response.error_code != ErrorCode.none):
            return
        if response.vote_granted:
            self.state = state = replace(state, granted=state.granted | {source})
            if s.won_election(state.granted, self.voters):
                if isinstance(state, Prospective):
                    self._become_candidate(now_ms, state.retries)
                else:
                    self._become_leader(now_ms)
        else:
            self.state = state = replace(state, rejected=state.rejected | {source})
            if isinstance(state, Prospective) and s.lost_election(state.rejected, self.voters):
                self._after_lost_pre_vote(state, now_ms)
            elif isinstance(state, Candidate) and s.lost_election(state.rejected, self.voters) and (
                    state.backoff_until_ms is None):
                self._start_backoff(state, now_ms)

    def _on_fetch_response(self, envelope: Envelope, response: m.FetchResponse, fetch_offset: int,
                           now_ms: int) -> None:
        if self._observe(response.leader_epoch, response.leader_id, now_ms):
            return
        state = self.state
        if isinstance(state, Follower) and envelope.source == state.leader_id and response.leader_epoch == state.epoch:
            self.state = self._follower.on_fetch_response(state, response, fetch_offset, now_ms)

    def _on_fetch_snapshot_response(self, response: m.FetchSnapshotResponse, now_ms: int) -> None:
        if self._observe(response.leader_epoch, response.leader_id, now_ms):
            return
        state = self.state
        if isinstance(state, Follower) and response.leader_epoch == state.epoch:
            self.state = self._follower.on_fetch_snapshot_response(state, response, now_ms)

    def _on_quorum_epoch_response(self, source: int, response: m.BeginQuorumEpochResponse | m.EndQuorumEpochResponse,
                                  now_ms: int) -> None:
        if self._observe(response.leader_epoch, response.leader_id, now_ms):
            return
        if (isinstance(response, m.BeginQuorumEpochResponse) and self._leader is not None
                and response.error_code == ErrorCode.none and response.leader_epoch == self.epoch):
            self._leader.progress.begin_epoch_acked.add(source)
        elif isinstance(response, m.EndQuorumEpochResponse) and response.error_code == ErrorCode.none:
            self._end_epoch_acked.add(source)

    # ------------------------------------------------------------------ sending

    def _send_vote_requests(self, now_ms: int) -> None:
        """Vote requests, or pre-vote requests for the next epoch, to the voters that have not answered."""
        state = self.state
        assert isinstance(state, Candidate | Prospective)
        if isinstance(state, Candidate) and state.backoff_until_ms is not None:
            return
        # Ask for votes with what is durable, not with the log's end: a leader's appends linger unflushed, and
        # so does a restarted process's tail still in the page cache. Votes won on a tail that a power loss then
        # takes away would make a leader without entries its predecessor committed (simulation seed 27216).
        # Kafka flushes right after each append, so its log end is always durable.
        last = self.log.last_flushed_offset_and_epoch()
        pre_vote = isinstance(state, Prospective)
        epoch = state.epoch + 1 if pre_vote else state.epoch
        for voter in sorted(self.voters - state.granted - state.rejected):
            vote = m.VoteRequest(self.cluster_id, epoch, self.node_id, last.epoch, last.offset, voter, pre_vote)
            self._channel.send(voter, vote, now_ms)

    def _leader_or_none(self) -> int:
        leader = self.leader_id
        return NO_LEADER if leader is None else leader

    def _fetch_error(self, error: ErrorCode) -> m.FetchResponse:
        hw = -1 if self.high_watermark is None else self.high_watermark
        return m.FetchResponse(error, self._leader_or_none(), self.epoch, hw, self.log.start_offset)
