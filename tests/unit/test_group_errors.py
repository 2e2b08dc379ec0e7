"""Bad input to the group coordinator (issue 15, item 7), one row per case: unknown groups and members,
stale generations, fenced instances, oversized metadata, floods of joins, and coordinator-level refusals."""

import pytest
from kio.schema.errors import ErrorCode

from replog.coordinator.group import GroupState
from replog.coordinator.outcomes import CommitResult, LeaveResult, LeavingMember

from .group_shell import RANGE, Shell, config

E = ErrorCode


def stable(size=2, **cfg):
    shell = Shell(config(**cfg)) if cfg else Shell()
    return shell, shell.stable_group(size)


# Each case: (sentence id, action on a Stable two-member group -> request id, expected error)
CASES_ON_A_STABLE_GROUP = [
    (
        "a heartbeat from an unknown member gets UNKNOWN_MEMBER_ID",
        lambda s, ids: s.heartbeat("stranger", 1),
        E.unknown_member_id,
    ),
    (
        "a heartbeat from a stale generation gets ILLEGAL_GENERATION",
        lambda s, ids: s.heartbeat(ids[1], 0),
        E.illegal_generation,
    ),
    (
        "a sync from an unknown member gets UNKNOWN_MEMBER_ID",
        lambda s, ids: s.sync("stranger", 1),
        E.unknown_member_id,
    ),
    (
        "a sync from a stale generation gets ILLEGAL_GENERATION",
        lambda s, ids: s.sync(ids[1], 7),
        E.illegal_generation,
    ),
    (
        "a sync naming another protocol gets INCONSISTENT_GROUP_PROTOCOL",
        lambda s, ids: s.sync(ids[1], 1, protocol_name="roundrobin"),
        E.inconsistent_group_protocol,
    ),
    (
        "a join from an unknown member id gets UNKNOWN_MEMBER_ID",
        lambda s, ids: s.join("stranger"),
        E.unknown_member_id,
    ),
    (
        "a join with another protocol type gets INCONSISTENT_GROUP_PROTOCOL",
        lambda s, ids: s.join(protocol_type="connect"),
        E.inconsistent_group_protocol,
    ),
    (
        "a join sharing no protocol with the group gets INCONSISTENT_GROUP_PROTOCOL",
        lambda s, ids: s.join(protocols=(("sticky", b""),)),
        E.inconsistent_group_protocol,
    ),
    (
        "a join with too short a session timeout gets INVALID_SESSION_TIMEOUT",
        lambda s, ids: s.join(session_ms=5999),
        E.invalid_session_timeout,
    ),
    (
        "a join with too long a session timeout gets INVALID_SESSION_TIMEOUT",
        lambda s, ids: s.join(session_ms=1_800_001),
        E.invalid_session_timeout,
    ),
    (
        "a join with oversized member metadata is refused",
        lambda s, ids: s.join(protocols=(("range", b"x" * (1 << 20)),)),
        E.invalid_request,
    ),
    (
        "a join with the empty group id gets INVALID_GROUP_ID",
        lambda s, ids: s.join(group=""),
        E.invalid_group_id,
    ),
    (
        "a leave from an unknown member gets UNKNOWN_MEMBER_ID",
        lambda s, ids: s.leave(LeavingMember("stranger")),
        E.unknown_member_id,
    ),
    (
        "a leave naming an instance id the group does not know gets UNKNOWN_MEMBER_ID",
        lambda s, ids: s.leave(LeavingMember(ids[1], "no-such-instance")),
        E.unknown_member_id,
    ),
    (
        "a commit from a stale generation gets ILLEGAL_GENERATION",
        lambda s, ids: s.commit(ids[1], 0, {("t", 0): 5}),
        E.illegal_generation,
    ),
    (
        "a commit from an unknown member gets UNKNOWN_MEMBER_ID",
        lambda s, ids: s.commit("stranger", 1, {("t", 0): 5}),
        E.unknown_member_id,
    ),
    (
        "a commit outside group management to a group with members gets UNKNOWN_MEMBER_ID",
        lambda s, ids: s.commit("", -1, {("t", 0): 5}),
        E.unknown_member_id,
    ),
    (
        "a commit with metadata over offset.metadata.max.bytes gets OFFSET_METADATA_TOO_LARGE",
        lambda s, ids: s.commit(ids[1], 1, {("t", 0): 5}, metadata="m" * 4097),
        E.offset_metadata_too_large,
    ),
]


@pytest.mark.parametrize(
    ("action", "expected"),
    [c[1:] for c in CASES_ON_A_STABLE_GROUP],
    ids=[c[0] for c in CASES_ON_A_STABLE_GROUP],
)
def test_bad_requests_to_a_stable_group(action, expected):
    shell, ids = stable()
    members_before = set(shell.group.members)
    assert error_of(shell.answered(action(shell, ids))) == expected
    assert shell.group.state is GroupState.STABLE  # nothing a bad request says moves the group
    assert set(shell.group.members) == members_before


def error_of(reply):
    """The reply's error; for OffsetCommit the first partition's, for LeaveGroup the first member's."""
    if isinstance(reply, CommitResult):
        return reply.partitions[0][-1]
    if isinstance(reply, LeaveResult) and reply.error == E.none:
        return reply.members[0][-1]
    return reply.error


# Each case: (sentence id, action on a coordinator without the group -> request id, expected error)
CASES_ON_AN_UNKNOWN_GROUP = [
    (
        "a heartbeat for an unknown group gets UNKNOWN_MEMBER_ID",
        lambda s: s.heartbeat("m", 1, group="nope"),
        E.unknown_member_id,
    ),
    (
        "a sync for an unknown group gets UNKNOWN_MEMBER_ID",
        lambda s: s.sync("m", 1, group="nope"),
        E.unknown_member_id,
    ),
    (
        "a join with a member id for an unknown group gets UNKNOWN_MEMBER_ID",
        lambda s: s.join("m", group="nope"),
        E.unknown_member_id,
    ),
    (
        "a commit with a generation for an unknown group gets ILLEGAL_GENERATION",
        lambda s: s.commit("m", 3, {("t", 0): 1}, group="nope"),
        E.illegal_generation,
    ),
]


@pytest.mark.parametrize(
    ("action", "expected"),
    [c[1:] for c in CASES_ON_AN_UNKNOWN_GROUP],
    ids=[c[0] for c in CASES_ON_AN_UNKNOWN_GROUP],
)
def test_requests_for_an_unknown_group(action, expected):
    shell = Shell()
    assert error_of(shell.answered(action(shell))) == expected
    assert "nope" not in shell.coordinator.groups  # none of them creates the group


def test_a_leave_for_an_unknown_group_reports_each_member_unknown():
    shell = Shell()
    reply = shell.answered(shell.leave(LeavingMember("a"), LeavingMember("b"), group="nope"))
    assert reply.error == E.none
    assert [error for _, error in reply.members] == [E.unknown_member_id] * 2


def test_unknown_groups_are_described_as_dead_and_cannot_be_deleted():
    shell = Shell()
    summary = shell.coordinator.describe_group("nope")
    assert (summary.error, summary.state, summary.members) == (E.none, "Dead", ())
    assert shell.coordinator.delete_group("nope", 0)[0] == E.group_id_not_found
    assert shell.coordinator.delete_offsets("nope", [("t", 0)])[0] == E.group_id_not_found
    error, offsets = shell.coordinator.fetch_offsets("nope", [("t", 0)])
    assert error == E.none and [(o.offset, o.metadata) for o in offsets] == [(-1, "")]


# ----------------------------------------------------------------------------------- group.max.size


def test_group_max_size_refuses_a_member_past_the_limit():
    shell, ids = stable(2, group_max_size=2)
    rid = shell.join(require_known=False)
    assert shell.answered(rid).error == E.group_max_size_reached
    assert shell.group.size == 2 and shell.group.state is GroupState.STABLE


def test_group_max_size_bounds_a_flood_of_first_joins():
    shell = Shell(config(group_max_size=3))
    replies = [shell.answered(shell.join()) for _ in range(10)]
    assert [r.error for r in replies] == [E.member_id_required] * 3 + [E.group_max_size_reached] * 7
    assert len(shell.coordinator.groups["g"].pending_members) == 3


def test_group_max_size_during_a_rebalance_counts_members_that_rejoined():
    shell = Shell(config(group_max_size=3))
    members = shell.stable_group(3)
    shell.join(members[0])
    shell.join(members[1])
    _, rid = shell.join_new()  # a newcomer fills the third place while the last member is away
    late = shell.join(members[2])
    # Three have rejoined: the last member to come back is the one left out, and the rebalance completes.
    assert shell.answered(late).error == E.group_max_size_reached
    assert members[2] not in shell.group.members
    assert (shell.answered(rid).error, shell.answered(rid).generation_id) == (E.none, 2)


# ---------------------------------------------------------------------------------- coordinator level


def test_a_group_of_a_partition_still_loading_gets_load_in_progress_or_a_gentle_answer():
    shell = Shell(load=False)
    shell.coordinator.begin_loading(shell.coordinator.partition_for("g"))
    assert shell.answered(shell.join()).error == E.coordinator_load_in_progress
    assert shell.answered(shell.sync("m", 1)).error == E.rebalance_in_progress  # rejoin, do not rediscover
    assert shell.answered(shell.heartbeat("m", 1)).error == E.none  # answered blindly, as Kafka does
    assert shell.coordinator.fetch_offsets("g", None) == (E.coordinator_load_in_progress, [])


def test_a_group_of_a_partition_this_broker_does_not_lead_gets_not_coordinator():
    shell = Shell(load=False)
    assert shell.answered(shell.join()).error == E.not_coordinator
    assert shell.answered(shell.commit("", -1, {("t", 0): 1})).partitions == (("t", 0, E.not_coordinator),)
    assert shell.coordinator.describe_group("g").error == E.not_coordinator


def test_a_member_rejoining_with_the_same_metadata_during_completing_gets_the_generation_again():
    shell = Shell()
    member, rid = shell.join_new()
    shell.advance(3000)
    again = shell.answered(shell.join(member))
    assert (again.error, again.generation_id, again.leader_id) == (E.none, 1, member)
    assert again.members == shell.answered(rid).members  # the leader gets the member list again
    assert shell.group.state is GroupState.COMPLETING_REBALANCE


def test_a_commit_while_completing_gets_rebalance_in_progress():
    shell = Shell()
    member, _ = shell.join_new()
    shell.advance(3000)
    reply = shell.answered(shell.commit(member, 1, {("t", 0): 9}))
    assert reply.partitions == (("t", 0, E.rebalance_in_progress),)


def test_a_sync_during_preparing_gets_rebalance_in_progress():
    shell, (leader, follower) = stable()
    shell.join(leader)
    assert shell.answered(shell.sync(follower, 1)).error == E.rebalance_in_progress


def test_a_joined_static_instance_with_a_stale_member_id_is_fenced():
    shell = Shell()
    shell.stable_group(2, static=True)
    instance = "i-1"
    current = shell.group.static_members[instance]
    assert shell.answered(shell.heartbeat("old-id", 1, instance=instance)).error == E.fenced_instance_id
    assert shell.answered(shell.sync("old-id", 1, instance=instance)).error == E.fenced_instance_id
    reply = shell.answered(shell.leave(LeavingMember("old-id", instance)))
    assert reply.members[0][1] == E.fenced_instance_id
    assert (
        shell.answered(shell.join("old-id", instance=instance, protocols=RANGE)).error == E.fenced_instance_id
    )
    assert shell.group.static_members[instance] == current


def test_a_refused_first_join_does_not_create_the_group():
    shell = Shell()
    shell.join(group="fresh", session_ms=1)
    shell.join(group="fresh", protocols=())
    assert "fresh" not in shell.coordinator.groups
    assert shell.coordinator.list_groups() == []
