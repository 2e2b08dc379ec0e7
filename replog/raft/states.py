"""The quorum states of KafkaRaftClient as frozen dataclasses, and the election rules as pure functions.

A node is in exactly one state. Unattached: an epoch without a known leader or a vote. Voted: voted in this
epoch. Candidate: asking for votes in this epoch. Leader, Follower: the epoch's leader is known. Resigned: a
former leader of this epoch that steps down (it must not vote again in it). Deadlines are absolute times in
milliseconds of the injected clock; randomness comes from the caller's `random.Random`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from kio.schema.errors import ErrorCode

from replog.raft.messages import OffsetAndEpoch
from replog.raft.quorum_state_file import ElectionState, VoterSetMismatchError

# KafkaRaftClient.RETRY_BACKOFF_BASE_MS: the unit of the election back-offs.
RETRY_BACKOFF_BASE_MS = 100
# LeaderState.CHECK_QUORUM_TIMEOUT_FACTOR: a leader resigns after 1.5 fetch timeouts without a majority.
CHECK_QUORUM_TIMEOUT_FACTOR = 1.5


class Role(Enum):
    UNATTACHED = "Unattached"
    VOTED = "Voted"
    PROSPECTIVE = "Prospective"
    CANDIDATE = "Candidate"
    LEADER = "Leader"
    FOLLOWER = "Follower"
    RESIGNED = "Resigned"


@dataclass(frozen=True, slots=True)
class Unattached:
    epoch: int
    election_deadline_ms: int | None  # None for an observer, which never stands for election
    role = Role.UNATTACHED


@dataclass(frozen=True, slots=True)
class Voted:
    epoch: int
    voted_id: int
    election_deadline_ms: int
    role = Role.VOTED


@dataclass(frozen=True, slots=True)
class Prospective:
    """KIP-996: asking for pre-votes before standing, in the current epoch, so that a node cut off from the
    quorum cannot raise the epoch (and depose a healthy leader) when it comes back. It keeps the epoch's
    leader or vote, if any: a pre-vote round changes nothing that must be saved."""

    epoch: int
    granted: frozenset[int]
    rejected: frozenset[int]
    retries: int
    election_deadline_ms: int
    leader_id: int | None
    voted_id: int | None
    role = Role.PROSPECTIVE


@dataclass(frozen=True, slots=True)
class Candidate:
    epoch: int
    granted: frozenset[int]  # voters, the candidate included
    rejected: frozenset[int]
    retries: int  # elections this node has lost in a row, for the back-off
    election_deadline_ms: int
    backoff_until_ms: int | None = None  # set once the election is lost: wait, then stand again
    role = Role.CANDIDATE


@dataclass(frozen=True, slots=True)
class Leader:
    epoch: int
    epoch_start_offset: int  # the offset of this epoch's LeaderChange entry
    role = Role.LEADER


@dataclass(frozen=True, slots=True)
class Follower:
    epoch: int
    leader_id: int
    fetch_deadline_ms: int  # no answer from the leader by then: stand for election (or look for it)
    leader_resigned: bool = False  # EndQuorumEpoch: the leader asked for a successor, pre-votes are welcome
    role = Role.FOLLOWER


@dataclass(frozen=True, slots=True)
class Resigned:
    epoch: int
    election_deadline_ms: int
    preferred_successors: tuple[int, ...]
    role = Role.RESIGNED


QuorumState = Unattached | Voted | Prospective | Candidate | Leader | Follower | Resigned


def election_state(state: QuorumState, local_id: int, voters: frozenset[int]) -> ElectionState:
    """What the quorum-state file records for `state`."""
    match state:
        case Voted(voted_id=voted):
            return ElectionState(state.epoch, None, voted, voters)
        case Prospective(leader_id=leader, voted_id=voted):
            return ElectionState(state.epoch, leader, voted, voters)
        case Candidate():
            return ElectionState(state.epoch, None, local_id, voters)
        case Leader() | Resigned():
            return ElectionState(state.epoch, local_id, None, voters)
        case Follower(leader_id=leader):
            return ElectionState(state.epoch, leader, None, voters)
    return ElectionState(state.epoch, None, None, voters)


def restart_state(saved: ElectionState | None, log_epoch: int, local_id: int, voters: frozenset[int],
                  now_ms: int, election_deadline: Callable[[], int], fetch_deadline_ms: int) -> QuorumState:
    """The state a node starts in (QuorumState.initialize): the saved epoch, never as leader.

    `election_deadline` draws a randomized election deadline (a voter's, for the states that wait for one).
    """
    if saved is not None and saved.voted_id is not None and local_id not in voters:
        raise VoterSetMismatchError(
            f"node {local_id} quorum-state records a vote in epoch {saved.epoch}, so it was a voter, "
            f"but it is not in controller.quorum.voters {sorted(voters)}")

    def unattached(epoch: int) -> Unattached:
        return Unattached(epoch, election_deadline() if local_id in voters else None)

    if saved is None or saved.epoch < log_epoch:
        return unattached(max(log_epoch, 0))
    if saved.leader_id == local_id:
        # A leader restarts resigned in its epoch: it must not vote in it again, and its unflushed entries
        # may be gone, so it must not lead it again either.
        return Resigned(saved.epoch, election_deadline(), ())
    if saved.voted_id == local_id:
        return Candidate(saved.epoch, frozenset({local_id}), frozenset(), 1, election_deadline())
    if saved.voted_id is not None:
        return Voted(saved.epoch, saved.voted_id, election_deadline())
    if saved.leader_id is not None:
        return Follower(saved.epoch, saved.leader_id, fetch_deadline_ms)
    return unattached(saved.epoch)


def timer_deadline_ms(state: QuorumState) -> int | None:
    """When the state's own timer fires: an election, a back-off, a fetch timeout; None for a leader (its
    timers are in LeaderProgress) and an observer without a leader."""
    match state:
        case Candidate(backoff_until_ms=backoff) if backoff is not None:
            return backoff
        case Unattached() | Voted() | Resigned() | Candidate() | Prospective():
            return state.election_deadline_ms
        case Follower():
            return state.fetch_deadline_ms
    return None


def after_lost_pre_vote(state: Prospective, local_id: int, election_deadline: Callable[[], int],
                        fetch_deadline_ms: int) -> QuorumState:
    """Back to the epoch's leader (its fetches decide whether it is really gone), or to waiting
    (Kafka's prospectiveTransitionAfterElectionLoss), never forgetting that it led or voted in the epoch.
    `election_deadline` draws a randomized deadline, for the states that wait for an election."""
    if state.leader_id == local_id:  # it led this epoch: it must neither vote nor lead in it again
        return Resigned(state.epoch, election_deadline(), ())
    if state.leader_id is not None:
        return Follower(state.epoch, state.leader_id, fetch_deadline_ms)
    if state.voted_id is not None:  # its own vote too, as a candidate that lost: one vote per epoch
        return Voted(state.epoch, state.voted_id, election_deadline())
    return Unattached(state.epoch, election_deadline())


def request_error(same_cluster: bool, sender_may_vote: bool, request_epoch: int, local_epoch: int,
                  ) -> ErrorCode | None:
    """The checks every quorum request passes first; `sender_may_vote` is False for a Vote, Begin- or
    EndQuorumEpoch from outside the voter set (or to a node outside it): never a vote, nor a leader."""
    if not same_cluster:
        return ErrorCode.inconsistent_cluster_id
    if not sender_may_vote:
        return ErrorCode.inconsistent_voter_set
    if request_epoch < local_epoch:
        return ErrorCode.fenced_leader_epoch
    return None


def leader_id_of(state: QuorumState, local_id: int) -> int | None:
    match state:
        case Leader():
            return local_id
        case Follower(leader_id=leader):
            return leader
    return None


# ------------------------------------------------------------------ timers


def random_election_timeout_ms(rng: random.Random, election_timeout_ms: int) -> int:
    """Uniform in [T, 2T) (QuorumState.randomElectionTimeoutMs), so voters rarely time out together."""
    return election_timeout_ms + rng.randrange(election_timeout_ms)


def binary_exponential_backoff_ms(rng: random.Random, retries: int, backoff_max_ms: int) -> int:
    """After the `retries`-th lost election: 100 ms times a random number below 2^retries, capped."""
    assert retries >= 1
    return min(RETRY_BACKOFF_BASE_MS * rng.randrange(1 << min(retries, 20)), backoff_max_ms)


def strict_exponential_backoff_ms(position: int, backoff_max_ms: int) -> int:
    """How long a voter listed at `position` in EndQuorumEpoch's successors waits; -1 (unlisted) waits most.

    The first preferred successor stands at once, the next after 100 ms, then 200, 400 ... capped.
    """
    if position < 0:
        return backoff_max_ms
    if position == 0:
        return 0
    return min(RETRY_BACKOFF_BASE_MS << min(position - 1, 20), backoff_max_ms)


# ------------------------------------------------------------------ voting


def log_is_up_to_date(candidate_last: OffsetAndEpoch, local_last: OffsetAndEpoch) -> bool:
    """Raft's rule: the candidate's last (epoch, end offset) is at least the voter's."""
    return candidate_last.is_at_least(local_last)


def may_grant_vote(state: QuorumState, candidate_id: int, candidate_last: OffsetAndEpoch,
                   local_last: OffsetAndEpoch) -> bool:
    """Whether a voter in `state` (already in the candidate's epoch) gives its one vote of the epoch.

    Unattached: if the candidate's log is up to date. Voted: only again to the same candidate (a duplicate
    request). A candidate votes for itself, a leader or follower knows the epoch's leader, and a resigned
    leader led this epoch: they all refuse.
    """
    match state:
        case Unattached() | Prospective(leader_id=None, voted_id=None):
            return log_is_up_to_date(candidate_last, local_last)
        case Voted(voted_id=voted) | Prospective(leader_id=None, voted_id=voted):
            return voted == candidate_id
    return False


def may_grant_pre_vote(state: QuorumState, candidate_last: OffsetAndEpoch, local_last: OffsetAndEpoch,
                       heard_from_leader: bool) -> bool:
    """KIP-996: a pre-vote binds nothing, so any voter may give it to an up-to-date log, except a leader
    and a follower that fetched from its leader within the fetch timeout (that leader is fine: no election
    is needed) and was not told it resigned."""
    if isinstance(state, Leader):
        return False
    if isinstance(state, Follower) and heard_from_leader and not state.leader_resigned:
        return False
    return log_is_up_to_date(candidate_last, local_last)


def won_election(granted: frozenset[int], voters: frozenset[int]) -> bool:
    return len(granted & voters) > len(voters) // 2


def lost_election(rejected: frozenset[int], voters: frozenset[int]) -> bool:
    """So many voters refused that the rest cannot make a majority."""
    return len(rejected & voters) > len(voters) - (len(voters) // 2 + 1)


# ------------------------------------------------------------------ commitment


def majority_high_watermark(voter_offsets: dict[int, int], voters: frozenset[int], epoch_start_offset: int,
                            current: int | None) -> int | None:
    """The leader's new high watermark, or None when it does not move (LeaderState.maybeUpdateHighWatermark).

    The offset a majority of VOTERS has reached: sorted descending, the one at index n/2. Observers are not
    in `voters` and never count. It commits nothing until it passes `epoch_start_offset`, i.e. until the
    epoch's own LeaderChange entry is on a majority (an earlier epoch's entries are committed only by it),
    and it never goes down.
    """
    offsets = sorted((voter_offsets.get(voter, 0) for voter in voters), reverse=True)
    candidate = offsets[len(voters) // 2]
    if candidate <= epoch_start_offset:
        return None
    if current is not None and candidate <= current:
        return None
    return candidate
