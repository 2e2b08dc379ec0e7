"""ListGroups, DescribeGroups and DeleteGroups over the groups one coordinator holds (Kafka's
handleListGroups, handleDescribeGroup / GroupMetadata.summary, handleDeleteGroups)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from replog.coordinator.group import ClassicGroup, GroupState
from replog.coordinator.offsets import OffsetStore, tombstones
from replog.coordinator.outcomes import AppendTombstones
from replog.coordinator.records import GroupMetadataKey

S = GroupState


@dataclass(frozen=True, slots=True)
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...]
    error: ErrorCode = ErrorCode.none


def list_groups(groups: Iterable[ClassicGroup], states_filter: Iterable[str] = ()) -> list[GroupOverview]:
    """ListGroups v4+ filters by state, case-insensitively; an empty filter lists every group."""
    wanted = {state.lower() for state in states_filter}
    return [
        GroupOverview(g.group_id, g.protocol_type or "", g.state.value)
        for g in groups
        if not wanted or g.state.value.lower() in wanted
    ]


def describe_group(group_id: str, group: ClassicGroup | None) -> GroupSummary:
    """An unknown group is described as Dead with no members, not as an error (Kafka before DescribeGroups
    v6). Member metadata and assignments are shown only for a Stable group, where they mean something."""
    if group is None:
        return GroupSummary(group_id, S.DEAD.value, "", "", ())
    stable = group.is_(S.STABLE)
    members = tuple(
        MemberSummary(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.metadata(group.protocol_name) if stable and group.protocol_name is not None else b"",
            m.assignment if stable else b"",
        )
        for m in group.members.values()
    )
    protocol = group.protocol_name or "" if stable else ""
    return GroupSummary(group_id, group.state.value, group.protocol_type or "", protocol, members)


def delete_group(
    group_id: str, group: ClassicGroup | None, store: OffsetStore, now_ms: int
) -> tuple[ErrorCode, AppendTombstones | None]:
    """DeleteGroups for one group: only an Empty group goes, with its offsets; the caller then forgets it.
    A group that exists only through offsets committed outside group management is Empty too."""
    if group is None or group.is_(S.DEAD):
        return ErrorCode.group_id_not_found, None
    if not group.is_(S.EMPTY):
        return ErrorCode.non_empty_group, None
    group.transition_to(S.DEAD, now_ms)
    removed = tombstones(group_id, store.remove_group(group_id))
    return ErrorCode.none, AppendTombstones(group_id, removed.keys + (GroupMetadataKey(group_id),))
