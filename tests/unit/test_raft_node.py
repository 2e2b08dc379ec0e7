"""RaftNode driven message by message with a fake clock: elections, persistence order, replication, fencing."""

import random

import pytest
from kio.schema.errors import ErrorCode

from replog.raft import messages as m
from replog.raft.commits import Committed, LoadSnapshot
from replog.raft.config import QuorumConfig, QuorumConfigError
from replog.raft.messages import Envelope, LogEntry, OffsetAndEpoch
from replog.raft.node import NotLeaderError, RaftNode
from replog.raft.quorum_state_file import ElectionState, MemoryQuorumStateStore, VoterSetMismatchError
from replog.raft.raft_log import MemoryRaftLog
from replog.raft.states import Role
from tests.unit.raft_node_fixtures import (
    CLUSTER,
    deliver,
    elect,
    fetch_request,
    leader_with,
    make_node,
    respond,
    stand,
    vote_request,
)

# ------------------------------------------------------------------ elections


def test_a_new_voter_times_out_asks_for_pre_votes_and_stands_in_epoch_1():
    store = MemoryQuorumStateStore()
    node = make_node(store=store)
    assert (node.role, node.epoch) == (Role.UNATTACHED, 0)
    deadline = node.next_deadline_ms()
    assert 1000 <= deadline < 2000  # the randomized election timeout
    assert node.tick(deadline - 1) == []
    pre_votes = node.tick(deadline)
    assert (node.role, node.epoch) == (Role.PROSPECTIVE, 0)  # KIP-996: no new epoch yet, nothing to save
    assert store.state == ElectionState(0, None, None, frozenset({1, 2, 3}))
    assert sorted((e.destination, e.message) for e in pre_votes) == [
        (2, vote_request(1, 1, voter=2, pre_vote=True)), (3, vote_request(1, 1, voter=3, pre_vote=True))]
    sent = respond(node, pre_votes[0], m.VoteResponse(ErrorCode.none, -1, 0, True), deadline + 1)
    assert (node.role, node.epoch) == (Role.CANDIDATE, 1)
    assert store.state == ElectionState(1, None, 1, frozenset({1, 2, 3}))  # voted for itself, saved
    assert sorted((e.destination, e.message) for e in sent) == [
        (2, vote_request(1, 1, voter=2)), (3, vote_request(1, 1, voter=3))]


def test_a_majority_of_votes_makes_a_leader_that_appends_leader_change_and_begins_the_epoch():
    store = MemoryQuorumStateStore()
    node = make_node(store=store)
    sent = elect(node, now=1500)
    assert (node.role, node.leader_id) == (Role.LEADER, 1)
    assert store.state == ElectionState(1, 1, None, frozenset({1, 2, 3}))
    assert node.log.read(0, 5) == (LogEntry(1, b"LeaderChange leader=1 epoch=1", control=True),)
    assert sorted(e.destination for e in sent if isinstance(e.message, m.BeginQuorumEpochRequest)) == [2, 3]
    assert node.high_watermark is None  # nothing committed until LeaderChange is on a majority
    assert node.propose([b"a", b"b"], 1500) == 2


def test_votes_from_non_voters_never_count():
    node = make_node(voters=(1, 2, 3, 4, 5))
    node.tick(node.next_deadline_ms())
    for outsider in (100, 101, 102):
        node.handle(Envelope(outsider, 1, 1, m.VoteResponse(ErrorCode.none, -1, 0, True)), 2000)
    assert node.role is Role.PROSPECTIVE


def test_a_lost_election_backs_off_then_stands_in_the_next_epoch():
    node = make_node()
    requests = stand(node, 1600)
    for request in requests:
        respond(node, request, m.VoteResponse(ErrorCode.none, -1, 1, False), 1600)
    assert node.role is Role.CANDIDATE and node.state.backoff_until_ms is not None
    assert 1600 <= node.state.backoff_until_ms <= 1600 + 100  # first loss: 0 or 100 ms
    node.tick(node.state.backoff_until_ms)  # asks for pre-votes again before a second epoch
    assert (node.role, node.epoch, node.state.retries) == (Role.PROSPECTIVE, 1, 2)


def test_a_voter_grants_one_vote_per_epoch_and_saves_it_first():
    store = MemoryQuorumStateStore()
    node = make_node(store=store)
    saved_at_response = []

    class Spy(MemoryQuorumStateStore):
        def write(self, state):
            saved_at_response.append(state)
            super().write(state)

    node = make_node(store=Spy())
    first = deliver(node, 2, vote_request(3, 2), 10)
    assert first[0].message == m.VoteResponse(ErrorCode.none, -1, 3, True)
    assert saved_at_response[-1] == ElectionState(3, None, 2, frozenset({1, 2, 3}))  # before the answer left
    assert deliver(node, 2, vote_request(3, 2), 11)[0].message.vote_granted  # the same candidate again
    assert not deliver(node, 3, vote_request(3, 3, voter=1), 12)[0].message.vote_granted  # another one


def test_a_vote_is_not_granted_when_saving_it_fails():
    class Broken(MemoryQuorumStateStore):
        def write(self, state):
            if state.voted_id == 2:
                raise OSError("disk full")
            super().write(state)

    node = make_node(store=Broken())
    with pytest.raises(OSError):
        deliver(node, 2, vote_request(3, 2), 10)
    assert node.role is Role.UNATTACHED  # the state did not change, no answer went out


@pytest.mark.parametrize(
    ("source", "request_", "error"),
    [
        (2, vote_request(0, 2), ErrorCode.fenced_leader_epoch),  # node is at epoch 1 below
        (7, vote_request(5, 7), ErrorCode.inconsistent_voter_set),  # not a voter
        (3, vote_request(5, 2), ErrorCode.inconsistent_voter_set),  # candidate id is not the sender
        (2, vote_request(5, 2, voter=3), ErrorCode.inconsistent_voter_set),  # addressed to another voter
        (2, m.VoteRequest("other", 5, 2, 0, 0, 1), ErrorCode.inconsistent_cluster_id),
    ],
)
def test_refused_vote_requests(source, request_, error):
    node = make_node()
    deliver(node, 2, m.BeginQuorumEpochRequest(CLUSTER, 2, 1), 0)
    answer = deliver(node, source, request_, 5)[-1].message
    assert (answer.error_code, answer.vote_granted) == (error, False)
    assert (node.role, node.epoch) == (Role.FOLLOWER, 1)


@pytest.mark.parametrize(
    ("source", "request_"),
    [
        (7, m.BeginQuorumEpochRequest(CLUSTER, 7, 5)),  # a node outside the voter set claims an epoch
        (3, m.BeginQuorumEpochRequest(CLUSTER, 2, 5)),  # a voter claims it for another
        (7, m.EndQuorumEpochRequest(CLUSTER, 7, 5, (1,))),  # a node outside the voter set resigns
    ],
)
def test_quorum_epoch_requests_from_outside_the_voter_set_are_refused_and_change_nothing(source, request_):
    node = make_node()
    deliver(node, 2, m.BeginQuorumEpochRequest(CLUSTER, 2, 1), 0)
    deadline = node.next_deadline_ms()
    answer = deliver(node, source, request_, 5)[-1].message
    assert (answer.error_code, answer.leader_id, answer.leader_epoch) == (ErrorCode.inconsistent_voter_set, 2, 1)
    assert (node.role, node.epoch, node.leader_id, node.next_deadline_ms()) == (Role.FOLLOWER, 1, 2, deadline)


def test_votes_are_asked_for_the_durable_log_not_its_unflushed_tail():
    log = MemoryRaftLog()
    log.append([LogEntry(1, b"a"), LogEntry(1, b"b")])
    log.flush()
    log.append([LogEntry(2, b"lingering")])  # a former leader's append, not flushed yet
    node = make_node(log=log, now=0)
    pre_votes = node.tick(node.next_deadline_ms())
    assert {(r.message.last_offset, r.message.last_offset_epoch) for r in pre_votes} == {(2, 1)}


def test_a_stale_log_gets_no_vote():
    log = MemoryRaftLog()
    log.append([LogEntry(2, b"x"), LogEntry(2, b"y")])
    node = make_node(log=log)
    assert not deliver(node, 2, vote_request(3, 2, last_epoch=2, last_offset=1), 0)[0].message.vote_granted
    assert deliver(node, 3, vote_request(3, 3, last_epoch=2, last_offset=2, voter=1), 0)[0].message.vote_granted


def test_a_single_voter_leads_at_once():
    node = make_node(voters=(1,))
    assert node.role is Role.LEADER and node.epoch == 1
    node.tick(node.next_deadline_ms())  # the linger flush
    assert node.high_watermark == 1


def test_an_idle_single_voter_leader_has_no_deadline_to_wake_for():
    """Check-quorum needs other voters: a lone leader's deadline for it must not fire, or, once passed,
    fire again at every turn of the event loop (the controller's timer spun hundreds of times a second)."""
    node = make_node(voters=(1,))
    node.tick(node.next_deadline_ms())  # the linger flush
    assert node.next_deadline_ms() >= 1 << 62
    node.tick(10 ** 9)
    assert node.next_deadline_ms() >= 1 << 62


# ------------------------------------------------------------------ replication


def test_high_watermark_needs_a_majority_of_voters_and_observers_do_not_count():
    node = leader_with()
    assert node.log.end_offset == 3 and node.high_watermark is None
    deliver(node, 100, fetch_request(100, 3, 1), 1600)  # an observer has everything
    assert node.high_watermark is None
    answer = deliver(node, 2, fetch_request(2, 1, 1), 1600)[0].message
    assert node.high_watermark == 1 and answer.high_watermark == 1 and len(answer.records) == 2
    deliver(node, 2, fetch_request(2, 3, 1), 1601)
    assert node.high_watermark == 3
    assert [c.offset for c in node.take_committed()] == [0, 1, 2]


def test_the_leader_answers_a_diverging_follower_with_its_epoch_end():
    leader = leader_with()
    answer = deliver(leader, 2, fetch_request(2, 5, 0), 1600)[0].message  # node 2 claims 5 entries of epoch 0
    assert answer.diverging_epoch == OffsetAndEpoch(0, 0) and answer.records == ()
    assert leader.high_watermark is None  # a diverging fetch says nothing about what node 2 holds


def test_follower_truncates_on_diverging_epoch_then_appends():
    log = MemoryRaftLog()
    log.append([LogEntry(1, b"c"), LogEntry(1, b"stale"), LogEntry(1, b"stale2")])
    log.flush()
    follower = make_node(node_id=2, log=log)
    sent = deliver(follower, 1, m.BeginQuorumEpochRequest(CLUSTER, 1, 2), 0)
    fetch = next(e for e in sent if isinstance(e.message, m.FetchRequest))
    assert (fetch.message.fetch_offset, fetch.message.last_fetched_epoch) == (3, 1)
    response = m.FetchResponse(ErrorCode.none, 1, 2, 1, 0, diverging_epoch=OffsetAndEpoch(1, 1))
    again = respond(follower, fetch, response, 10)
    assert follower.log.end_offset == 1  # min(leader's end of epoch 1, own end of epoch 1)
    refetch = next(e for e in again if isinstance(e.message, m.FetchRequest))
    assert (refetch.message.fetch_offset, refetch.message.last_fetched_epoch) == (1, 1)
    records = (LogEntry(2, b"LeaderChange leader=1 epoch=2", control=True),)
    respond(follower, refetch, m.FetchResponse(ErrorCode.none, 1, 2, 2, 0, records=records), 11)
    assert follower.log.end_offset == 2 and follower.log.flushed_end_offset == 2
    assert follower.high_watermark == 2
    assert follower.take_committed() == [Committed(0, LogEntry(1, b"c")), Committed(1, records[0])]


def test_a_duplicate_or_stale_fetch_response_is_dropped():
    follower = make_node(node_id=2)
    fetch = next(e for e in deliver(follower, 1, m.BeginQuorumEpochRequest(CLUSTER, 1, 2), 0)
                 if isinstance(e.message, m.FetchRequest))
    response = m.FetchResponse(ErrorCode.none, 1, 2, 0, 0, records=(LogEntry(2, b"x"),))
    respond(follower, fetch, response, 1)
    respond(follower, fetch, response, 2)  # duplicated by the network
    assert follower.log.end_offset == 1


def test_a_follower_below_the_log_start_loads_the_snapshot():
    leader = leader_with([b"v%d" % i for i in range(5)])
    deliver(leader, 2, fetch_request(2, 6, 1), 1600)
    assert leader.high_watermark == 6
    assert len(leader.take_committed()) == 6
    leader.create_snapshot(OffsetAndEpoch(6, 1), b"state-at-6")
    answer = deliver(leader, 3, fetch_request(3, 0, 0), 1601)[0].message
    assert answer.snapshot_id == OffsetAndEpoch(6, 1)

    follower = make_node(node_id=3)
    fetch = next(e for e in deliver(follower, 1, m.BeginQuorumEpochRequest(CLUSTER, 1, 1), 0)
                 if isinstance(e.message, m.FetchRequest))
    snapshot_request = respond(follower, fetch, answer, 1)[0]
    assert isinstance(snapshot_request.message, m.FetchSnapshotRequest)
    chunk = deliver(leader, 3, snapshot_request.message, 1602, snapshot_request.correlation_id)[0]
    assert chunk.message.unaligned_records == b"state-at-6" and chunk.message.size == 10
    after = follower.handle(chunk, 3)
    assert follower.log.start_offset == 6 and follower.high_watermark == 6
    assert follower.take_committed() == [LoadSnapshot(OffsetAndEpoch(6, 1), b"state-at-6")]
    assert after[0].message.fetch_offset == 6 and after[0].message.last_fetched_epoch == 1


@pytest.mark.parametrize(
    ("request_epoch", "error"),
    [(0, ErrorCode.fenced_leader_epoch), (2, ErrorCode.unknown_leader_epoch)],
)
def test_fetches_with_another_epoch_are_refused(request_epoch, error):
    leader = leader_with()
    answer = deliver(leader, 2, fetch_request(2, 0, 0, epoch=request_epoch), 1600)[0].message
    assert (answer.error_code, answer.leader_id, answer.leader_epoch) == (error, 1, 1)


def test_an_empty_fetch_is_parked_until_the_flush_of_new_data_or_its_wait_ends():
    leader = leader_with()
    assert deliver(leader, 2, fetch_request(2, 3, 1, wait=500), 1600, correlation_id=5) == []
    assert leader.next_deadline_ms() <= 2100
    leader.propose([b"c"], 1610)
    assert leader.next_deadline_ms() == 1610 + 25  # the linger
    assert deliver(leader, 3, fetch_request(3, 3, 1, wait=500), 1611, correlation_id=7)[0].message.records == (
        LogEntry(1, b"c"),)  # a new fetch reads the unflushed tail at once
    woken = leader.tick(1635)
    assert [(e.destination, e.correlation_id, e.message.records) for e in woken] == [(2, 5, (LogEntry(1, b"c"),))]
    assert deliver(leader, 2, fetch_request(2, 4, 1, wait=500), 1640, correlation_id=6) == []
    expired = leader.tick(2140)
    assert [(e.destination, e.correlation_id, e.message.records) for e in expired] == [(2, 6, ())]


def test_not_leader_answers_name_the_leader():
    follower = make_node(node_id=2)
    deliver(follower, 1, m.BeginQuorumEpochRequest(CLUSTER, 1, 4), 0)
    answer = deliver(follower, 3, fetch_request(3, 0, 0, epoch=4), 1)[-1].message
    assert (answer.error_code, answer.leader_id, answer.leader_epoch) == (ErrorCode.not_leader_or_follower, 1, 4)
    with pytest.raises(NotLeaderError):
        follower.propose([b"x"], 2)


# ------------------------------------------------------------------ timeouts, resignation, restarts


def test_a_follower_that_hears_nothing_for_the_fetch_timeout_stands():
    follower = make_node(node_id=2)
    deliver(follower, 1, m.BeginQuorumEpochRequest(CLUSTER, 1, 3), 0)
    follower.tick(1999)
    assert follower.role is Role.FOLLOWER
    follower.tick(2000)
    assert (follower.role, follower.epoch, follower.state.leader_id) == (Role.PROSPECTIVE, 3, 1)


def test_a_leader_without_fetches_from_a_majority_resigns_and_tells_the_voters():
    leader = leader_with()
    leader.tick(1500 + 2999)
    assert leader.role is Role.LEADER
    sent = leader.tick(1500 + 3000)  # 1.5 fetch timeouts
    assert leader.role is Role.RESIGNED
    sent += leader.tick(1500 + 3001)
    assert sorted(e.destination for e in sent if isinstance(e.message, m.EndQuorumEpochRequest)) == [2, 3]


def test_end_quorum_epoch_makes_the_first_successor_stand_at_once():
    follower = make_node(node_id=2)
    deliver(follower, 1, m.BeginQuorumEpochRequest(CLUSTER, 1, 3), 0)
    deliver(follower, 1, m.EndQuorumEpochRequest(CLUSTER, 1, 3, (2, 3)), 100)
    assert follower.next_deadline_ms() == 100
    follower.tick(100)
    assert (follower.role, follower.epoch) == (Role.PROSPECTIVE, 3)


def test_graceful_resign_prefers_the_most_caught_up_voter():
    leader = leader_with()
    deliver(leader, 3, fetch_request(3, 3, 1), 1600)
    sent = leader.resign(1601) + leader.tick(1602)
    ends = [e.message for e in sent if isinstance(e.message, m.EndQuorumEpochRequest)]
    assert ends and ends[0].preferred_successors == (3, 2)


@pytest.mark.parametrize(
    ("saved", "role"),
    [
        (ElectionState(5, 1, None, frozenset({1, 2, 3})), Role.RESIGNED),  # never leads again in its epoch
        (ElectionState(5, None, 1, frozenset({1, 2, 3})), Role.CANDIDATE),
        (ElectionState(5, None, 2, frozenset({1, 2, 3})), Role.VOTED),
        (ElectionState(5, 2, None, frozenset({1, 2, 3})), Role.FOLLOWER),
        (ElectionState(5, None, None, frozenset({1, 2, 3})), Role.UNATTACHED),
    ],
)
def test_a_restart_resumes_the_saved_epoch(saved, role):
    store = MemoryQuorumStateStore()
    store.write(saved)
    node = make_node(store=store)
    assert (node.role, node.epoch) == (role, 5)


def test_a_restart_with_other_voters_is_refused():
    store = MemoryQuorumStateStore()
    store.write(ElectionState(5, 2, None, frozenset({1, 2, 4})))
    with pytest.raises(VoterSetMismatchError, match=r"\[1, 2, 3\].*\[1, 2, 4\]"):
        make_node(store=store)


def test_a_log_epoch_above_the_saved_one_wins():
    store = MemoryQuorumStateStore()
    store.write(ElectionState(2, None, 3, frozenset({1, 2, 3})))
    log = MemoryRaftLog()
    log.append([LogEntry(4, b"x")])
    node = make_node(store=store, log=log)
    assert (node.role, node.epoch) == (Role.UNATTACHED, 4)


def test_describe_quorum_on_the_leader():
    leader = leader_with()
    deliver(leader, 2, fetch_request(2, 3, 1), 1600)
    deliver(leader, 100, fetch_request(100, 1, 1), 1601)
    answer = deliver(leader, 9, m.DescribeQuorumRequest(), 1602)[0].message
    assert (answer.error_code, answer.leader_id, answer.leader_epoch, answer.high_watermark) == (
        ErrorCode.none, 1, 1, 3)
    assert [(r.replica_id, r.log_end_offset) for r in answer.current_voters] == [(1, 3), (2, 3), (3, 0)]
    assert [(r.replica_id, r.log_end_offset) for r in answer.observers] == [(100, 1)]


def test_a_refused_candidate_in_a_higher_epoch_does_not_reset_the_election_timer():
    """A candidate with a short log that keeps losing raises the epoch at every back-off; voters that follow
    it to each new epoch keep their timer (QuorumState.transitionToUnattached), or none of them would ever
    stand (the simulation found that livelock)."""
    log = MemoryRaftLog()
    log.append([LogEntry(1, b"x")])
    node = make_node(log=log)
    deadline = node.next_deadline_ms()
    for epoch in range(2, 6):
        assert not deliver(node, 2, vote_request(epoch, 2), deadline - 10)[0].message.vote_granted
        assert (node.role, node.epoch, node.next_deadline_ms()) == (Role.UNATTACHED, epoch, deadline)
    node.tick(deadline)
    assert (node.role, node.epoch) == (Role.PROSPECTIVE, 5)


def test_an_observer_never_stands_and_finds_the_leader_through_any_voter():
    observer = make_node(node_id=100)
    assert observer.next_deadline_ms() == 0  # no election timer: it asks a voter at once
    probe = observer.tick(0)[0]
    assert probe.destination in (1, 2, 3) and probe.message.max_wait_ms == 0
    answer = m.FetchResponse(ErrorCode.fenced_leader_epoch, 2, 6, 40, 0)
    sent = respond(observer, probe, answer, 1)
    assert (observer.role, observer.leader_id, observer.epoch) == (Role.FOLLOWER, 2, 6)
    assert sent[0].destination == 2 and sent[0].message.replica_id == 100
    observer.tick(1 + 2000)  # the leader went quiet: look again, never stand
    assert observer.role is Role.UNATTACHED


def test_a_quorum_without_static_voters_is_refused():
    config = QuorumConfig(voters={}, bootstrap_servers=(("a", 1),))
    with pytest.raises(QuorumConfigError, match="controller.quorum.voters is empty"):
        RaftNode(1, config, MemoryRaftLog(), MemoryQuorumStateStore(), random.Random(1), 0)
