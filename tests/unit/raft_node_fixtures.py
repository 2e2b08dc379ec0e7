"""RaftNode test helpers: a node with a fake clock and in-memory log and quorum state, messages delivered and
answered by hand, and a node brought to leadership or following."""

import random

from kio.schema.errors import ErrorCode

from replog.raft import messages as m
from replog.raft.config import QuorumConfig
from replog.raft.messages import Envelope
from replog.raft.node import RaftNode
from replog.raft.quorum_state_file import MemoryQuorumStateStore
from replog.raft.raft_log import MemoryRaftLog

CLUSTER = "replog"


def quorum_config(voters=(1, 2, 3), **overrides):
    return QuorumConfig(voters={v: ("127.0.0.1", 9000 + v) for v in voters}, **overrides)


def make_node(node_id=1, voters=(1, 2, 3), log=None, store=None, now=0, **overrides):
    return RaftNode(node_id, quorum_config(voters, **overrides), log or MemoryRaftLog(), store or MemoryQuorumStateStore(),
                    random.Random(node_id), now)


def deliver(node, source, message, now, correlation_id=1):
    return node.handle(Envelope(source, node.node_id, correlation_id, message), now)


def respond(node, request, message, now):
    """The response to `request` (an envelope the node sent) arriving from its destination."""
    return node.handle(Envelope(request.destination, request.source, request.correlation_id, message), now)


def vote_request(epoch, candidate, last_epoch=0, last_offset=0, voter=1, pre_vote=False):
    return m.VoteRequest(CLUSTER, epoch, candidate, last_epoch, last_offset, voter, pre_vote)


def stand(node, now=0):
    """Time out, win node 2's pre-vote (KIP-996); returns the candidate's vote requests."""
    pre_votes = node.tick(node.next_deadline_ms())
    pre_vote = next(r for r in pre_votes if r.destination == 2)
    return respond(node, pre_vote, m.VoteResponse(ErrorCode.none, -1, node.epoch, True), now)


def elect(node, now=0):
    """Time out, stand, and win with node 2's vote; returns what the new leader sent."""
    vote = next(r for r in stand(node, now) if r.destination == 2)
    return respond(node, vote, m.VoteResponse(ErrorCode.none, -1, node.epoch, True), now)


def fetch_request(replica, offset, last_epoch, epoch=1, wait=0):
    return m.FetchRequest(CLUSTER, replica, epoch, offset, last_epoch, wait)


def leader_with(values=(b"a", b"b")):
    node = make_node()
    elect(node, now=1500)
    node.propose(list(values), 1500)
    node.tick(node.next_deadline_ms())  # flush
    return node


def following(node_id=2, leader=1, epoch=3):
    follower = make_node(node_id=node_id)
    fetch = next(e for e in deliver(follower, leader, m.BeginQuorumEpochRequest(CLUSTER, leader, epoch), 0)
                 if isinstance(e.message, m.FetchRequest))
    respond(follower, fetch, m.FetchResponse(ErrorCode.none, leader, epoch, 0, 0), 10)  # the leader is heard
    return follower
