"""Table tests of the quorum's pure election and commitment rules (replog.raft.states)."""

import random

import pytest
from kio.schema.errors import ErrorCode

from replog.raft import states as s
from replog.raft.messages import OffsetAndEpoch
from replog.raft.quorum_state_file import ElectionState

VOTERS3 = frozenset({1, 2, 3})
VOTERS5 = frozenset({1, 2, 3, 4, 5})


@pytest.mark.parametrize(
    ("candidate", "local", "expected"),
    [
        (OffsetAndEpoch(10, 3), OffsetAndEpoch(10, 3), True),  # equal logs
        (OffsetAndEpoch(11, 3), OffsetAndEpoch(10, 3), True),  # same last epoch, longer
        (OffsetAndEpoch(9, 3), OffsetAndEpoch(10, 3), False),  # same last epoch, shorter
        (OffsetAndEpoch(2, 4), OffsetAndEpoch(50, 3), True),  # the last epoch decides first
        (OffsetAndEpoch(50, 3), OffsetAndEpoch(2, 4), False),
        (OffsetAndEpoch(0, 0), OffsetAndEpoch(0, 0), True),  # two empty logs
    ],
)
def test_log_is_up_to_date(candidate, local, expected):
    assert s.log_is_up_to_date(candidate, local) is expected


LAST = OffsetAndEpoch(10, 3)


@pytest.mark.parametrize(
    ("state", "candidate", "candidate_last", "expected"),
    [
        (s.Unattached(5, 100), 2, LAST, True),
        (s.Unattached(5, 100), 2, OffsetAndEpoch(9, 3), False),  # a shorter log never gets the vote
        (s.Voted(5, 2, 100), 2, LAST, True),  # the same candidate asking again (a duplicate request)
        (s.Voted(5, 2, 100), 3, LAST, False),  # one vote per epoch
        (s.Voted(5, 2, 100), 3, OffsetAndEpoch(99, 4), False),  # even for a better log
        (s.Candidate(5, frozenset({1}), frozenset(), 1, 100), 2, LAST, False),  # voted for itself
        (s.Leader(5, 0), 2, LAST, False),
        (s.Follower(5, 3, 100), 2, LAST, False),  # this epoch has a leader
        (s.Resigned(5, 100, ()), 2, LAST, False),  # led this epoch
    ],
)
def test_may_grant_vote(state, candidate, candidate_last, expected):
    assert s.may_grant_vote(state, candidate, candidate_last, LAST) is expected


@pytest.mark.parametrize(
    ("granted", "voters", "won"),
    [
        ({1}, VOTERS3, False),
        ({1, 2}, VOTERS3, True),
        ({1, 2}, VOTERS5, False),
        ({1, 2, 3}, VOTERS5, True),
        ({1, 7, 8}, VOTERS3, False),  # votes from non-voters never count
        ({1}, frozenset({1}), True),
    ],
)
def test_won_election(granted, voters, won):
    assert s.won_election(frozenset(granted), voters) is won


@pytest.mark.parametrize(
    ("rejected", "voters", "lost"),
    [
        ({2}, VOTERS3, False),
        ({2, 3}, VOTERS3, True),
        ({2, 3}, VOTERS5, False),
        ({2, 3, 4}, VOTERS5, True),
        ({7, 8, 9}, VOTERS3, False),
    ],
)
def test_lost_election(rejected, voters, lost):
    assert s.lost_election(frozenset(rejected), voters) is lost


@pytest.mark.parametrize(
    ("offsets", "voters", "epoch_start", "current", "expected"),
    [
        ({1: 10, 2: 8, 3: 3}, VOTERS3, 5, None, 8),  # the middle of three
        ({1: 10, 2: 8, 3: 3}, VOTERS3, 8, None, None),  # the epoch's first entry (offset 8) is not on a majority
        ({1: 10, 2: 9, 3: 3}, VOTERS3, 8, None, 9),  # now it is: everything below commits with it
        ({1: 10, 2: 8, 3: 3}, VOTERS3, 5, 8, None),  # no move
        ({1: 10, 2: 6, 3: 3}, VOTERS3, 5, 8, None),  # never down
        ({1: 10, 2: 3, 3: 3, 100: 10, 101: 10}, VOTERS3, 0, None, 3),  # observers never count
        ({1: 10}, VOTERS3, 0, None, None),  # voters that never fetched are at 0
        ({1: 10, 2: 9, 3: 8, 4: 1, 5: 0}, VOTERS5, 0, None, 8),
    ],
)
def test_majority_high_watermark(offsets, voters, epoch_start, current, expected):
    assert s.majority_high_watermark(offsets, voters, epoch_start, current) == expected


def test_random_election_timeout_is_in_t_to_2t():
    rng = random.Random(1)
    timeouts = {s.random_election_timeout_ms(rng, 1000) for _ in range(2000)}
    assert min(timeouts) >= 1000 and max(timeouts) < 2000 and len(timeouts) > 500


@pytest.mark.parametrize(("retries", "upper"), [(1, 100), (2, 300), (3, 700), (30, 1000)])
def test_binary_exponential_backoff_grows_and_is_capped(retries, upper):
    rng = random.Random(2)
    backoffs = [s.binary_exponential_backoff_ms(rng, retries, 1000) for _ in range(500)]
    assert all(b % 100 == 0 or b == 1000 for b in backoffs)
    assert 0 <= min(backoffs) and max(backoffs) == upper


@pytest.mark.parametrize(("position", "expected"), [(0, 0), (1, 100), (2, 200), (3, 400), (5, 1000), (-1, 1000)])
def test_strict_exponential_backoff(position, expected):
    assert s.strict_exponential_backoff_ms(position, 1000) == expected


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (s.Unattached(4, 1), ElectionState(4, None, None, VOTERS3)),
        (s.Voted(4, 2, 1), ElectionState(4, None, 2, VOTERS3)),
        (s.Candidate(4, frozenset({1}), frozenset(), 1, 1), ElectionState(4, None, 1, VOTERS3)),
        (s.Leader(4, 0), ElectionState(4, 1, None, VOTERS3)),
        (s.Resigned(4, 1, ()), ElectionState(4, 1, None, VOTERS3)),
        (s.Follower(4, 3, 1), ElectionState(4, 3, None, VOTERS3)),
    ],
)
def test_election_state_saved_for_each_state(state, expected):
    assert s.election_state(state, 1, VOTERS3) == expected


def _prospective(leader=None, voted=None):
    return s.Prospective(5, frozenset({1}), frozenset(), 1, 100, leader, voted)


@pytest.mark.parametrize(
    ("state", "heard_from_leader", "candidate_last", "expected"),
    [
        (s.Unattached(5, 100), False, LAST, True),
        (s.Voted(5, 3, 100), False, LAST, True),  # a pre-vote binds nothing: a vote elsewhere does not matter
        (_prospective(), False, LAST, True),
        (s.Candidate(5, frozenset({1}), frozenset(), 1, 100), False, LAST, True),
        (s.Unattached(5, 100), False, OffsetAndEpoch(9, 3), False),  # still only for an up-to-date log
        (s.Follower(5, 3, 100), True, LAST, False),  # its leader is fine
        (s.Follower(5, 3, 100), False, LAST, True),  # silent for a fetch timeout
        (s.Follower(5, 3, 100, leader_resigned=True), True, LAST, True),  # the leader asked for a successor
        (s.Leader(5, 0), False, LAST, False),
        (s.Resigned(5, 100, ()), False, LAST, True),
    ],
)
def test_may_grant_pre_vote(state, heard_from_leader, candidate_last, expected):
    assert s.may_grant_pre_vote(state, candidate_last, LAST, heard_from_leader) is expected


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (_prospective(leader=1), s.Resigned(5, 900, ())),  # node 1 led epoch 5
        (_prospective(leader=3), s.Follower(5, 3, 700)),
        (_prospective(voted=1), s.Voted(5, 1, 900)),  # a lost candidate keeps its own vote
        (_prospective(voted=2), s.Voted(5, 2, 900)),
        (_prospective(), s.Unattached(5, 900)),
    ],
)
def test_after_lost_pre_vote_keeps_the_epochs_leader_or_vote(state, expected):
    assert s.after_lost_pre_vote(state, 1, lambda: 900, 700) == expected


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (s.Unattached(5, None), None),  # an observer
        (s.Unattached(5, 100), 100),
        (s.Prospective(5, frozenset(), frozenset(), 1, 120, None, None), 120),
        (s.Candidate(5, frozenset(), frozenset(), 1, 130), 130),
        (s.Candidate(5, frozenset(), frozenset(), 1, 130, backoff_until_ms=160), 160),
        (s.Follower(5, 2, 140), 140),
        (s.Leader(5, 0), None),
    ],
)
def test_timer_deadline(state, expected):
    assert s.timer_deadline_ms(state) == expected


@pytest.mark.parametrize(
    ("same_cluster", "may_vote", "request_epoch", "expected"),
    [
        (True, True, 5, None),
        (True, True, 6, None),
        (True, True, 4, ErrorCode.fenced_leader_epoch),
        (True, False, 9, ErrorCode.inconsistent_voter_set),
        (False, True, 5, ErrorCode.inconsistent_cluster_id),
    ],
)
def test_request_error(same_cluster, may_vote, request_epoch, expected):
    assert s.request_error(same_cluster, may_vote, request_epoch, 5) == expected
