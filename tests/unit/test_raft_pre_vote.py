"""RaftNode's pre-vote (KIP-996) with a fake clock: a prospective asks before it stands, binds nobody, and a
lost round leaves its epoch's leader or vote as they were."""

import pytest
from kio.schema.errors import ErrorCode

from replog.raft import messages as m
from replog.raft.quorum_state_file import ElectionState, MemoryQuorumStateStore
from replog.raft.states import Role
from tests.unit.raft_node_fixtures import (
    deliver,
    fetch_request,
    following,
    leader_with,
    make_node,
    respond,
    vote_request,
)


def test_a_follower_that_hears_its_leader_refuses_pre_votes_and_changes_nothing():
    follower = following()
    answer = deliver(follower, 3, vote_request(4, 3, pre_vote=True, voter=2), 20)[0].message
    assert (answer.vote_granted, answer.leader_id, answer.leader_epoch) == (False, 1, 3)
    assert (follower.role, follower.epoch, follower.leader_id) == (Role.FOLLOWER, 3, 1)


def test_pre_votes_are_granted_once_the_leader_is_silent_and_bind_nothing():
    follower = following()
    assert deliver(follower, 3, vote_request(4, 3, pre_vote=True, voter=2), 10 + 2000)[0].message.vote_granted
    assert (follower.role, follower.epoch) == (Role.FOLLOWER, 3)  # no epoch change, no vote saved
    unattached = make_node(node_id=2)
    assert deliver(unattached, 3, vote_request(4, 3, pre_vote=True, voter=2), 0)[0].message.vote_granted
    assert deliver(unattached, 1, vote_request(4, 1, pre_vote=True, voter=2), 0)[0].message.vote_granted
    assert (unattached.role, unattached.epoch) == (Role.UNATTACHED, 0)


def test_a_pre_vote_from_a_candidate_behind_is_refused_with_our_epoch():
    follower = following(epoch=5)
    answer = deliver(follower, 3, vote_request(5, 3, pre_vote=True, voter=2), 10 + 2000)[0].message
    assert (answer.vote_granted, answer.leader_epoch) == (False, 5)


def test_a_prospective_that_loses_goes_back_to_its_leader():
    follower = following()
    pre_votes = follower.tick(10 + 2000)
    assert (follower.role, follower.epoch) == (Role.PROSPECTIVE, 3)
    for request in pre_votes:
        respond(follower, request, m.VoteResponse(ErrorCode.none, 1, 3, False), 2011)
    assert (follower.role, follower.leader_id, follower.epoch) == (Role.FOLLOWER, 1, 3)


def test_the_leader_tells_a_silent_voter_again():
    leader = leader_with()
    for voter in (2, 3):
        deliver(leader, voter, fetch_request(voter, 3, 1), 1600)
    deliver(leader, 2, fetch_request(2, 3, 1), 1600 + 1900)
    sent = leader.tick(1600 + 2000)  # node 3 has not fetched for a fetch timeout
    assert [(e.destination, type(e.message)) for e in sent] == [(3, m.BeginQuorumEpochRequest)]


@pytest.mark.parametrize(
    ("saved", "back_to"),
    [
        (ElectionState(5, 1, None, frozenset({1, 2, 3})), Role.RESIGNED),  # led epoch 5
        (ElectionState(5, None, 1, frozenset({1, 2, 3})), Role.VOTED),  # stood in epoch 5: voted for itself
        (ElectionState(5, None, 2, frozenset({1, 2, 3})), Role.VOTED),
        (ElectionState(5, None, None, frozenset({1, 2, 3})), Role.UNATTACHED),
    ],
)
def test_a_lost_pre_vote_round_keeps_the_epochs_leader_or_vote(saved, back_to):
    """A prospective must not forget, even for a moment, that it led or voted in its epoch: it could then
    grant a second vote in it (a late Vote of a rival candidate of that epoch)."""
    store = MemoryQuorumStateStore()
    store.write(saved)
    node = make_node(store=store)
    pre_votes = []
    while node.role is not Role.PROSPECTIVE:  # a restarted candidate backs off first
        pre_votes = node.tick(node.next_deadline_ms())
    assert store.state == saved
    if saved.leader_id is not None or saved.voted_id is not None:
        assert not deliver(node, 3, vote_request(5, 3, voter=1), 1)[-1].message.vote_granted
    for request in pre_votes:
        respond(node, request, m.VoteResponse(ErrorCode.none, -1, 5, False), 2)
    assert (node.role, node.epoch) == (back_to, 5) and store.state == saved
