"""Rebuild groups and offsets from an __consumer_offsets partition (Kafka's loadGroupsAndOffsets): what a
broker does when it becomes the partition's leader, before it answers for the partition's groups.

Records are replayed in log order; the last record for a key wins and a tombstone deletes the key, which is
also what the log cleaner keeps, so a compacted log loads to the same state. A group with a record and
members loads Stable; one without members, or known only through offsets, loads Empty.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from replog.coordinator.config import GroupCoordinatorConfig
from replog.coordinator.group import ClassicGroup, GroupState, Member
from replog.coordinator.offsets import OffsetStore, TopicPartition
from replog.coordinator.outcomes import OffsetAndMetadata, Outcome
from replog.coordinator.rebalance import prepare_rebalance, schedule_heartbeat
from replog.coordinator.records import (
    NO_TIMESTAMP,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    UnknownKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from replog.protocol.primitives import DecodeError


@dataclass(slots=True)
class LoadedPartition:
    groups: dict[str, ClassicGroup] = field(default_factory=dict)
    offsets: OffsetStore = field(default_factory=OffsetStore)


def replay(
    records: Iterable[tuple[bytes | memoryview, bytes | memoryview | None]],
) -> tuple[dict[str, GroupMetadataValue], dict[str, dict[TopicPartition, OffsetAndMetadata]]]:
    """The latest group record and offsets per group; DecodeError on a record that does not decode."""
    group_values: dict[str, GroupMetadataValue] = {}
    offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
    for key_bytes, value_bytes in records:
        key = decode_key(key_bytes)
        if isinstance(key, UnknownKey):
            continue  # a newer Kafka's record type (consumer-protocol groups): not ours
        if isinstance(key, GroupMetadataKey):
            if value_bytes is None:
                group_values.pop(key.group, None)
            else:
                group_values[key.group] = decode_group_metadata_value(value_bytes)
            continue
        assert isinstance(key, OffsetCommitKey)
        tp = (key.topic, key.partition)
        if value_bytes is None:
            offsets.get(key.group, {}).pop(tp, None)
        else:
            v = decode_offset_commit_value(value_bytes)
            expire = None if v.expire_timestamp == NO_TIMESTAMP else v.expire_timestamp
            offsets.setdefault(key.group, {})[tp] = OffsetAndMetadata(
                v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, expire
            )
    return group_values, {g: o for g, o in offsets.items() if o}


def load_partition(
    records: Iterable[tuple[bytes | memoryview, bytes | memoryview | None]],
    now_ms: int,
    config: GroupCoordinatorConfig,
) -> tuple[LoadedPartition, Outcome]:
    """Groups and offsets of one partition, and the session timers of the loaded members (Kafka's
    onGroupLoaded): a member that does not heartbeat within its session after a failover is removed."""
    group_values, offsets = replay(records)
    loaded = LoadedPartition()
    out = Outcome()
    for group_id, value in group_values.items():
        loaded.groups[group_id] = group_from_record(group_id, value)
    for group_id, group_offsets in offsets.items():
        loaded.groups.setdefault(group_id, ClassicGroup(group_id))
        for tp, offset in group_offsets.items():
            loaded.offsets.put(group_id, tp, offset)
    for group in loaded.groups.values():
        if group.size > config.group_max_size:
            # The limit was lowered: rebalance, which drops the members over it (giving them a chance to
            # commit first).
            prepare_rebalance(group, now_ms, config, out)
        for member in group.members.values():
            schedule_heartbeat(group, member, member.session_timeout_ms, now_ms, out)
    return loaded, out


def group_from_record(group_id: str, value: GroupMetadataValue) -> ClassicGroup:
    group = ClassicGroup(
        group_id,
        GroupState.STABLE if value.members else GroupState.EMPTY,
        value.current_state_timestamp,
        value.protocol_type or None,
        value.protocol,
        value.generation,
        value.leader,
    )
    if value.members and value.protocol is None:
        raise DecodeError(f"group {group_id!r}: a record with members but no protocol")
    for m in value.members:
        rebalance_timeout = (
            m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout
        )  # v0 records
        group.members[m.member_id] = Member(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            rebalance_timeout,
            m.session_timeout,
            value.protocol_type,
            ((value.protocol, m.subscription),),
            m.assignment,
        )
        if m.group_instance_id is not None:
            group.static_members[m.group_instance_id] = m.member_id
    group.subscribed_topics = group.compute_subscribed_topics()
    assert value.protocol is not None or not group.members
    return group
