"""A new leader of an __consumer_offsets partition rebuilds its groups and offsets from the records
(coordinator/loader.py): the log a coordinator wrote loads back to the same groups, last write wins,
tombstones delete, and other record types are skipped."""

import struct

import pytest
from kio.schema.errors import ErrorCode

from replog.coordinator import records
from replog.coordinator.group import GroupState
from replog.coordinator.loader import load_partition, replay
from replog.coordinator.outcomes import LeavingMember
from replog.protocol.primitives import DecodeError

from .group_shell import SESSION_MS, Shell, config

E = ErrorCode
S = GroupState


def failover(shell: Shell, cfg=None) -> Shell:
    """A second coordinator that loads the first one's log for the group's partition."""
    new = Shell(cfg, load=False)
    partition = new.coordinator.partition_for("g")
    new.coordinator.begin_loading(partition)
    new.now = shell.now
    new.apply(new.coordinator.finish_loading(partition, shell.log, new.now))
    return new


def test_a_stable_group_and_its_offsets_survive_a_failover():
    old = Shell()
    leader, follower = old.stable_group(2, static=True)
    old.commit(leader, 1, {("t", 0): 10, ("t", 1): 11})
    new = failover(old)
    group, before = new.group, old.group
    assert (group.state, group.generation_id, group.protocol_type, group.protocol_name, group.leader_id) == (
        S.STABLE,
        1,
        "consumer",
        "range",
        leader,
    )
    assert {m: (x.assignment, x.group_instance_id, x.protocols) for m, x in group.members.items()} == {
        m: (x.assignment, x.group_instance_id, x.protocols) for m, x in before.members.items()
    }
    assert group.static_members == before.static_members
    assert group.subscribed_topics == {"t"}
    assert new.coordinator.fetch_offsets("g", None) == old.coordinator.fetch_offsets("g", None)
    # Members carry on where they were: same generation, same assignment.
    assert new.answered(new.heartbeat(follower, 1, instance="i-1")).error == E.none
    sync = new.answered(new.sync(follower, 1, instance="i-1"))
    assert (sync.error, sync.assignment) == (E.none, before.members[follower].assignment)


def test_loaded_members_that_never_come_back_expire_after_their_session():
    old = Shell()
    leader, follower = old.stable_group(2)
    new = failover(old)
    new.advance(SESSION_MS // 2)
    new.heartbeat(leader, 1)
    new.advance(SESSION_MS // 2)
    assert follower not in new.group.members
    assert new.group.state is S.PREPARING_REBALANCE


def test_a_group_loaded_over_a_lowered_size_limit_rebalances():
    old = Shell()
    old.stable_group(3)
    new = failover(old, config(group_max_size=2))
    assert new.group.state is S.PREPARING_REBALANCE


def test_an_emptied_group_loads_empty_with_its_generation_and_offsets():
    old = Shell()
    (only,) = old.stable_group(1)
    old.commit(only, 1, {("t", 0): 3})
    old.leave(LeavingMember(only))
    new = failover(old)
    assert (new.group.state, new.group.generation_id, new.group.size) == (S.EMPTY, 2, 0)
    assert new.coordinator.fetch_offsets("g", [("t", 0)])[1][0].offset == 3


def key(k) -> bytes:
    return records.encode_key(k)


def commit(offset: int, ts: int = 0) -> bytes:
    return records.encode_offset_commit_value(records.OffsetCommitValue(offset, "", ts))


def test_the_last_record_per_key_wins_and_tombstones_delete():
    g1, g2 = records.GroupMetadataKey("g1"), records.GroupMetadataKey("g2")
    empty = records.encode_group_metadata_value(records.GroupMetadataValue("consumer", 4, None, None))
    log = [
        (key(records.OffsetCommitKey("g1", "t", 0)), commit(1)),
        (key(records.OffsetCommitKey("g1", "t", 0)), commit(2)),
        (key(records.OffsetCommitKey("g1", "t", 1)), commit(5)),
        (key(records.OffsetCommitKey("g1", "t", 1)), None),
        (key(g1), empty),
        (key(g2), empty),
        (key(g2), None),
        (struct.pack(">h", 3) + b"\x00\x02g3", b"\x00\x00whatever a newer Kafka writes"),
    ]
    groups, offsets = replay(log)
    assert set(groups) == {"g1"} and groups["g1"].generation == 4
    assert {g: {tp: o.offset for tp, o in tps.items()} for g, tps in offsets.items()} == {"g1": {("t", 0): 2}}


def test_a_group_known_only_through_offsets_loads_empty():
    loaded, out = load_partition(
        [(key(records.OffsetCommitKey("simple", "t", 0)), commit(9, ts=77))], 0, config()
    )
    group = loaded.groups["simple"]
    assert (group.state, group.protocol_type, group.generation_id) == (S.EMPTY, None, 0)
    assert loaded.offsets.get("simple")[("t", 0)].commit_timestamp_ms == 77
    assert out.timers == [] and out.replies == []


@pytest.mark.parametrize(
    "log",
    [
        [(b"\x00", None)],  # a key cut short
        [(key(records.GroupMetadataKey("g")), b"\x00\x03\x00")],  # a value cut short
        # A group record with members but no protocol could not have been written by a coordinator.
        [
            (
                key(records.GroupMetadataKey("g")),
                records.encode_group_metadata_value(
                    records.GroupMetadataValue(
                        "consumer",
                        1,
                        None,
                        "m",
                        (records.MemberMetadataValue("m", "c", "h", 6000, b"", b""),),
                    )
                ),
            )
        ],
    ],
    ids=["a truncated key", "a truncated value", "members without a protocol"],
)
def test_a_corrupt_partition_refuses_to_load(log):
    with pytest.raises(DecodeError):
        load_partition(log, 0, config())


def test_a_load_overtaken_by_an_unload_is_discarded():
    old = Shell()
    old.stable_group(1)
    new = Shell(load=False)
    partition = new.coordinator.partition_for("g")
    new.coordinator.begin_loading(partition)
    new.apply(new.coordinator.unload(partition))
    new.apply(new.coordinator.finish_loading(partition, old.log, 0))
    assert new.coordinator.groups == {}
    assert new.answered(new.join()).error == E.not_coordinator


def test_a_commit_replicated_after_the_partition_moved_is_not_kept_here():
    shell = Shell()
    shell.hold_writes = True
    rid = shell.commit("", -1, {("t", 0): 4})
    shell.apply(shell.coordinator.unload(shell.coordinator.partition_for("g")))
    shell.release()
    assert shell.answered(rid).partitions == (("t", 0, E.not_coordinator),)
    assert shell.coordinator.offsets.groups == {}
