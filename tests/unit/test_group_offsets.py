"""Committed offsets (coordinator/offsets.py) and the group admin APIs (coordinator/admin.py): commits
answered once replicated, fetches, Kafka 2.1+ retention, OffsetDelete, DeleteGroups, ListGroups and
DescribeGroups."""

import pytest
from kio.schema.errors import ErrorCode

from replog.coordinator import records
from replog.coordinator.group import ClassicGroup, GroupState
from replog.coordinator.offsets import commit_error_for_client, expired_offsets
from replog.coordinator.outcomes import AppendTombstones, LeavingMember, OffsetAndMetadata

from .group_shell import Shell

E = ErrorCode
S = GroupState


def fetched(shell, group="g", partitions=None):
    error, offsets = shell.coordinator.fetch_offsets(group, partitions)
    assert error == E.none
    return {(o.topic, o.partition): (o.offset, o.leader_epoch, o.metadata) for o in offsets}


def test_a_member_commit_is_answered_and_visible_only_once_replicated():
    shell = Shell()
    leader, _ = shell.stable_group(2)
    shell.hold_writes = True
    rid = shell.commit(leader, 1, {("t", 0): 10, ("t", 1): 20}, metadata="m")
    assert shell.pending(rid)
    assert fetched(shell, partitions=[("t", 0)]) == {("t", 0): (-1, -1, "")}
    shell.release()
    assert shell.answered(rid).partitions == (("t", 0, E.none), ("t", 1, E.none))
    assert fetched(shell) == {("t", 0): (10, 1, "m"), ("t", 1): (20, 1, "m")}


def test_a_failed_commit_write_changes_nothing_and_is_reported_as_kafka_does():
    shell = Shell()
    shell.hold_writes = True
    rid = shell.commit("", -1, {("t", 0): 10})
    shell.release(E.not_leader_or_follower)
    assert shell.answered(rid).partitions == (("t", 0, E.not_coordinator),)
    assert fetched(shell) == {}


def test_a_commit_outside_group_management_creates_an_empty_group():
    shell = Shell()
    rid = shell.commit("", -1, {("t", 3): 7})
    assert shell.answered(rid).partitions == (("t", 3, E.none),)
    assert shell.coordinator.groups["g"].state is S.EMPTY
    assert fetched(shell) == {("t", 3): (7, 1, "")}


def test_only_partitions_with_oversized_metadata_are_refused():
    shell = Shell()
    rid = shell.commit("", -1, {("t", 0): 1})
    big = shell.commit("", -1, {("t", 0): 2}, metadata="é" * 2049)  # 4098 bytes as UTF-8, over 4096
    assert shell.answered(rid).partitions[0][2] == E.none
    assert shell.answered(big).partitions == (("t", 0, E.offset_metadata_too_large),)
    assert fetched(shell) == {("t", 0): (1, 1, "")}


def test_a_commit_with_a_retention_time_is_stored_as_offset_commit_value_v1():
    shell = Shell()
    shell.now = 1000
    shell.commit("", -1, {("t", 0): 5}, retention_ms=500)
    value = shell.log[-1][1]
    assert value[:2] == b"\x00\x01"
    assert records.decode_offset_commit_value(value).expire_timestamp == 1500


def offset(commit_ms, expire_ms=None):
    return OffsetAndMetadata(1, -1, "", commit_ms, expire_ms)


def group(state, protocol_type="consumer", timestamp=500, topics=frozenset({"t"})):
    g = ClassicGroup("g", state=state, state_timestamp_ms=timestamp, protocol_type=protocol_type)
    g.subscribed_topics = topics if protocol_type == "consumer" else None
    return g


OFFSETS = {("t", 0): offset(0), ("old", 0): offset(0), ("x", 0): offset(0, expire_ms=50)}


@pytest.mark.parametrize(
    ("grp", "now", "expected"),
    [
        # Without group management offsets count from their commit (or an explicit expire timestamp).
        (None, 99, [("x", 0)]),
        (None, 100, [("old", 0), ("t", 0), ("x", 0)]),
        # An Empty group's offsets count from when it became Empty.
        (group(S.EMPTY), 599, [("x", 0)]),
        (group(S.EMPTY), 600, [("old", 0), ("t", 0), ("x", 0)]),
        # A group loaded from a record without a state timestamp counts from the commit.
        (group(S.EMPTY, timestamp=-1), 100, [("old", 0), ("t", 0), ("x", 0)]),
        # A Stable consumer group keeps the offsets of topics it subscribes to.
        (group(S.STABLE), 10_000, [("old", 0), ("x", 0)]),
        (group(S.STABLE, topics=None), 10_000, []),  # subscription unknown: keep everything
        (group(S.STABLE, protocol_type="connect"), 10_000, []),
        (group(S.PREPARING_REBALANCE), 10_000, []),
        (group(S.COMPLETING_REBALANCE), 10_000, []),
    ],
    ids=[
        "simple commits not yet expired",
        "simple commits expired after retention",
        "an empty group within retention of becoming empty",
        "an empty group past retention",
        "an empty group without a state timestamp counts from commits",
        "a stable consumer group keeps subscribed topics",
        "a stable group of unknown subscription keeps all",
        "a stable non-consumer group keeps all",
        "a rebalancing group keeps all",
        "a completing group keeps all",
    ],
)
def test_offset_retention(grp, now, expected):
    assert expired_offsets(grp, OFFSETS, now, retention_ms=100) == expected


def test_expiry_removes_an_empty_group_with_its_last_offsets_and_writes_tombstones():
    shell = Shell()
    shell.commit("", -1, {("t", 0): 5})
    shell.apply(shell.coordinator.expire_offsets(shell.coordinator.config.offsets_retention_ms - 1))
    assert "g" in shell.coordinator.groups
    shell.apply(shell.coordinator.expire_offsets(shell.coordinator.config.offsets_retention_ms))
    assert "g" not in shell.coordinator.groups and fetched(shell) == {}
    keys = [records.decode_key(k) for k, v in shell.log if v is None]
    assert keys == [records.OffsetCommitKey("g", "t", 0), records.GroupMetadataKey("g")]


# ---------------------------------------------------------------------------------------------- deletes


def test_offset_delete_keeps_offsets_of_topics_a_stable_consumer_group_subscribes_to():
    shell = Shell()
    leader, _ = shell.stable_group(2)
    shell.commit(leader, 1, {("t", 0): 1, ("gone", 0): 2})
    error, partitions, out = shell.coordinator.delete_offsets("g", [("t", 0), ("gone", 0)])
    assert error == E.none
    assert sorted(partitions) == [("gone", 0, E.none), ("t", 0, E.group_subscribed_to_topic)]
    assert out.writes == [AppendTombstones("g", (records.OffsetCommitKey("g", "gone", 0),))]
    assert fetched(shell) == {("t", 0): (1, 1, "")}


def test_offset_delete_of_an_empty_group_deletes_them_all():
    shell = Shell()
    shell.commit("", -1, {("t", 0): 1})
    error, partitions, _ = shell.coordinator.delete_offsets("g", [("t", 0), ("never", 9)])
    assert (error, partitions) == (E.none, [("t", 0, E.none), ("never", 9, E.none)])
    assert fetched(shell) == {}


def test_offset_delete_refuses_a_non_consumer_group_with_members():
    shell = Shell()
    member, rid = shell.join_new(protocol_type="connect")
    shell.advance(3000)
    shell.sync(member, 1, [(member, b"")])
    assert shell.coordinator.delete_offsets("g", [("t", 0)])[0] == E.non_empty_group


def test_delete_groups_removes_an_empty_group_and_its_offsets_but_not_a_live_one():
    shell = Shell()
    leader, follower = shell.stable_group(2)
    shell.commit(leader, 1, {("t", 0): 1})
    assert shell.coordinator.delete_group("g", shell.now)[0] == E.non_empty_group
    shell.leave(LeavingMember(leader), LeavingMember(follower))
    assert shell.group.state is S.EMPTY
    error, out = shell.coordinator.delete_group("g", shell.now)
    assert error == E.none
    assert out.writes == [
        AppendTombstones("g", (records.OffsetCommitKey("g", "t", 0), records.GroupMetadataKey("g")))
    ]
    assert "g" not in shell.coordinator.groups and fetched(shell) == {}


# ---------------------------------------------------------------------------------------- list, describe


def test_list_groups_filters_by_state_ignoring_case():
    shell = Shell()
    shell.stable_group(1)
    shell.commit("", -1, {("t", 0): 1}, group="simple")
    listed = shell.coordinator.list_groups()
    assert sorted((g.group_id, g.protocol_type, g.state) for g in listed) == [
        ("g", "consumer", "Stable"),
        ("simple", "", "Empty"),
    ]
    assert [g.group_id for g in shell.coordinator.list_groups(["STABLE"])] == ["g"]
    assert [g.group_id for g in shell.coordinator.list_groups(["empty", "dead"])] == ["simple"]


def test_describe_shows_metadata_and_assignments_only_when_stable():
    shell = Shell()
    leader, follower = shell.stable_group(2)
    summary = shell.coordinator.describe_group("g")
    assert (summary.state, summary.protocol_type, summary.protocol) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.assignment) for m in summary.members] == [(leader, b"a-0"), (follower, b"a-1")]
    assert all(m.metadata for m in summary.members)
    shell.join(leader)  # a rebalance: what members hold is no longer meaningful
    summary = shell.coordinator.describe_group("g")
    assert (summary.state, summary.protocol) == ("PreparingRebalance", "")
    assert {(m.metadata, m.assignment) for m in summary.members} == {(b"", b"")}


@pytest.mark.parametrize(("write_error", "answered"), [
    (ErrorCode.none, ErrorCode.none),
    (ErrorCode.unknown_topic_or_partition, ErrorCode.coordinator_not_available),
    (ErrorCode.not_enough_replicas, ErrorCode.coordinator_not_available),
    (ErrorCode.not_enough_replicas_after_append, ErrorCode.coordinator_not_available),
    (ErrorCode.request_timed_out, ErrorCode.coordinator_not_available),
    (ErrorCode.not_leader_or_follower, ErrorCode.not_coordinator),
    (ErrorCode.kafka_storage_error, ErrorCode.not_coordinator),
    (ErrorCode.message_too_large, ErrorCode.invalid_commit_offset_size),
])
def test_a_failed_offsets_write_is_answered_as_kafka_converts_it(write_error, answered):
    assert commit_error_for_client(write_error) == answered
