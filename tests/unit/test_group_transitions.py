"""The group state machine as a table: what each request from a known member gets in each state of a
two-member group, and which state the group is in afterwards."""

import pytest
from kio.schema.errors import ErrorCode

from replog.coordinator.group import GroupState
from replog.coordinator.outcomes import CommitResult

from .group_shell import Shell

E = ErrorCode
S = GroupState
PARKED = "parked"  # no answer yet: the request waits for the rebalance


def group_in(state: str) -> tuple[Shell, str, str]:
    """A two-member group in `state`; returns it with its leader and follower."""
    shell = Shell()
    leader, follower = shell.stable_group(2)
    if state in ("preparing", "completing"):
        shell.join(leader)  # the leader's rejoin starts a rebalance
    if state == "completing":
        shell.join(follower)  # everyone rejoined: generation 2 awaits the leader's assignment
    return shell, leader, follower


def heartbeat(shell, leader, follower):
    return shell.heartbeat(follower, shell.group.generation_id)


def sync(shell, leader, follower):
    return shell.sync(follower, shell.group.generation_id)


def commit(shell, leader, follower):
    return shell.commit(follower, shell.group.generation_id, {("t", 0): 1})


def follower_rejoins(shell, leader, follower):
    return shell.join(follower)


def leader_rejoins(shell, leader, follower):
    return shell.join(leader)


TABLE = [
    # (id, state, action, expected answer, state afterwards)
    ("a heartbeat while stable is fine", "stable", heartbeat, E.none, S.STABLE),
    (
        "a heartbeat while preparing says rejoin",
        "preparing",
        heartbeat,
        E.rebalance_in_progress,
        S.PREPARING_REBALANCE,
    ),
    ("a heartbeat while completing is fine", "completing", heartbeat, E.none, S.COMPLETING_REBALANCE),
    ("a sync while stable gets the assignment at once", "stable", sync, E.none, S.STABLE),
    ("a sync while preparing says rejoin", "preparing", sync, E.rebalance_in_progress, S.PREPARING_REBALANCE),
    (
        "a follower's sync while completing waits for the leader",
        "completing",
        sync,
        PARKED,
        S.COMPLETING_REBALANCE,
    ),
    ("a commit while stable is taken", "stable", commit, E.none, S.STABLE),
    ("a commit while preparing is still taken", "preparing", commit, E.none, S.PREPARING_REBALANCE),
    (
        "a commit while completing says rejoin",
        "completing",
        commit,
        E.rebalance_in_progress,
        S.COMPLETING_REBALANCE,
    ),
    (
        "a follower rejoining a stable group unchanged gets the generation back",
        "stable",
        follower_rejoins,
        E.none,
        S.STABLE,
    ),
    (
        "a follower rejoining while preparing completes the join",
        "preparing",
        follower_rejoins,
        E.none,
        S.COMPLETING_REBALANCE,
    ),
    (
        "a follower rejoining while completing gets the generation back",
        "completing",
        follower_rejoins,
        E.none,
        S.COMPLETING_REBALANCE,
    ),
    (
        "a leader rejoining a stable group starts a rebalance",
        "stable",
        leader_rejoins,
        PARKED,
        S.PREPARING_REBALANCE,
    ),
]


@pytest.mark.parametrize(
    ("state", "action", "expected", "after"), [row[1:] for row in TABLE], ids=[row[0] for row in TABLE]
)
def test_requests_from_members_in_each_state(state, action, expected, after):
    shell, leader, follower = group_in(state)
    rid = action(shell, leader, follower)
    if expected == PARKED:
        assert shell.pending(rid)
    else:
        reply = shell.answered(rid)
        error = reply.partitions[0][-1] if isinstance(reply, CommitResult) else reply.error
        assert error == expected
    assert shell.group.state is after
    assert set(shell.group.members) == {leader, follower}
