"""One broker's group coordinator, still sans-IO: the groups and offsets of the __consumer_offsets partitions
it leads, the coordinator-level checks every group request goes through (Kafka's validateGroupStatus), and
the routing of requests, timers and finished writes to the rules.

The shell in broker/ decodes requests into outcomes' values, calls these methods with the time, and carries
out the Outcome: sends replies, sets timers (replacing by key), appends records and reports back with
on_written. It calls begin_loading / finish_loading / unload when this broker gains or loses leadership of
an offsets partition.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from replog.coordinator import admin, joining, liveness, loader, offsets, rebalance, syncing
from replog.coordinator.config import GroupCoordinatorConfig
from replog.coordinator.group import ClassicGroup
from replog.coordinator.outcomes import (
    UNKNOWN_MEMBER_ID,
    AppendTombstones,
    HeartbeatRequest,
    HeartbeatResult,
    JoinRequest,
    JoinResult,
    LeaveRequest,
    LeaveResult,
    Outcome,
    StoreGroup,
    StoreOffsets,
    SyncRequest,
    SyncResult,
    Timer,
    TimerKind,
    Write,
)
from replog.coordinator.partitioning import partition_for
from replog.coordinator.records import GroupMetadataKey


class PartitionStatus(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"


class GroupCoordinator:
    def __init__(self, config: GroupCoordinatorConfig) -> None:
        self.config = config
        self.partitions: dict[int, PartitionStatus] = {}
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets = offsets.OffsetStore()

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def status_error(self, group_id: str, *, empty_id_allowed: bool = False) -> ErrorCode | None:
        """INVALID_GROUP_ID, COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR, else None. OffsetCommit,
        OffsetFetch, DescribeGroups and DeleteGroups accept the empty group id, as Kafka does."""
        if not group_id and not empty_id_allowed:
            return ErrorCode.invalid_group_id
        status = self.partitions.get(self.partition_for(group_id))
        if status is PartitionStatus.LOADING:
            return ErrorCode.coordinator_load_in_progress
        if status is None:
            return ErrorCode.not_coordinator
        return None

    # ------------------------------------------------------------ membership

    def join(self, request: JoinRequest, now_ms: int, fresh_uuid: str) -> Outcome:
        error = self.status_error(request.group_id)
        if error is None:
            group = self.groups.get(request.group_id)
            if group is None and request.member_id == UNKNOWN_MEMBER_ID:
                created = ClassicGroup(request.group_id, state_timestamp_ms=now_ms)
                out = joining.on_join(created, request, now_ms, self.config, fresh_uuid)
                if created.members or created.pending_members:  # a refused first join leaves nothing behind
                    self.groups[request.group_id] = created
                return out
            if group is not None:
                return joining.on_join(group, request, now_ms, self.config, fresh_uuid)
            error = ErrorCode.unknown_member_id  # a member id for a group that does not exist
        return Outcome(replies=[JoinResult(request.request_id, error, request.member_id)])

    def sync(self, request: SyncRequest, now_ms: int) -> Outcome:
        error = self.status_error(request.group_id)
        if error == ErrorCode.coordinator_load_in_progress:
            # The rebalance's state was lost with the old coordinator: have the member rejoin. Older clients
            # do not expect COORDINATOR_LOAD_IN_PROGRESS here.
            error = ErrorCode.rebalance_in_progress
        group = self.groups.get(request.group_id)
        if error is None and group is not None:
            return syncing.on_sync(group, request, now_ms)
        return Outcome(replies=[SyncResult(request.request_id, error or ErrorCode.unknown_member_id)])

    def heartbeat(self, request: HeartbeatRequest, now_ms: int) -> Outcome:
        error = self.status_error(request.group_id)
        if error == ErrorCode.coordinator_load_in_progress:
            error = ErrorCode.none  # the group is loading: answer blindly, as Kafka does
        group = self.groups.get(request.group_id)
        if error is None and group is not None:
            return liveness.on_heartbeat(group, request, now_ms)
        return Outcome(
            replies=[
                HeartbeatResult(request.request_id, ErrorCode.unknown_member_id if error is None else error)
            ]
        )

    def leave(self, request: LeaveRequest, now_ms: int) -> Outcome:
        error = self.status_error(request.group_id)
        if error is not None:
            return Outcome(replies=[LeaveResult(request.request_id, error)])
        group = self.groups.get(request.group_id)
        if group is None:
            return Outcome(replies=[liveness.unknown_group_leave(request)])
        return liveness.on_leave(group, request, now_ms, self.config)

    # --------------------------------------------------------------- offsets

    def commit(self, request: offsets.CommitRequest, now_ms: int) -> Outcome:
        error = self.status_error(request.group_id, empty_id_allowed=True)
        group = self.groups.get(request.group_id)
        if error is None and group is None:
            if request.generation_id >= 0:
                error = ErrorCode.illegal_generation  # a generation of a group that is not here
            else:
                group = self.groups[request.group_id] = ClassicGroup(
                    request.group_id, state_timestamp_ms=now_ms
                )
        if error is not None or group is None:
            return Outcome(replies=[offsets.refuse_commit(request, error or ErrorCode.unknown_server_error)])
        return offsets.on_commit(group, request, now_ms, self.config)

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> tuple[ErrorCode, list[offsets.FetchedOffset]]:
        """OffsetFetch for one group (v8+ asks for several: one call each)."""
        error = self.status_error(group_id, empty_id_allowed=True)
        if error is not None:
            return error, []
        return ErrorCode.none, offsets.fetch_offsets(self.offsets, group_id, partitions)

    def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[ErrorCode, list[tuple[str, int, ErrorCode]], Outcome]:
        error = self.status_error(group_id)
        if error is not None:
            return error, [], Outcome()
        group_error, errors, writes = offsets.delete_offsets(
            self.groups.get(group_id), self.offsets, group_id, partitions
        )
        return group_error, errors, Outcome(writes=[writes] if writes else [])

    def expire_offsets(self, now_ms: int) -> Outcome:
        """Kafka's periodic cleanupGroupMetadata (every offsets.retention.check.interval.ms)."""
        out = Outcome()
        for group_id in sorted(set(self.offsets.groups) | set(self.groups)):
            if self.status_error(group_id, empty_id_allowed=True) is not None:
                continue
            group = self.groups.get(group_id)
            expired, gone = offsets.expire_group_offsets(group, group_id, self.offsets, now_ms, self.config)
            keys = offsets.tombstones(group_id, expired).keys
            if gone:
                self.groups.pop(group_id, None)
                keys += (GroupMetadataKey(group_id),)
            if keys:
                out.writes.append(AppendTombstones(group_id, keys))
        return out

    # ----------------------------------------------------------------- admin

    def list_groups(self, states_filter: Iterable[str] = ()) -> list[admin.GroupOverview]:
        active = (
            g for g in self.groups.values() if self.status_error(g.group_id, empty_id_allowed=True) is None
        )
        return admin.list_groups(active, states_filter)

    def describe_group(self, group_id: str) -> admin.GroupSummary:
        error = self.status_error(group_id, empty_id_allowed=True)
        if error is not None:
            return admin.GroupSummary(group_id, "", "", "", (), error)
        return admin.describe_group(group_id, self.groups.get(group_id))

    def delete_group(self, group_id: str, now_ms: int) -> tuple[ErrorCode, Outcome]:
        error = self.status_error(group_id, empty_id_allowed=True)
        if error is not None:
            return error, Outcome()
        error, writes = admin.delete_group(group_id, self.groups.get(group_id), self.offsets, now_ms)
        if error == ErrorCode.none:
            del self.groups[group_id]
        return error, Outcome(writes=[writes] if writes else [])

    # ------------------------------------------------------- timers, writes

    def on_timer(self, timer: Timer, now_ms: int) -> Outcome:
        """A timer fired. One for a group this coordinator no longer has (unloaded, deleted) does nothing."""
        group = self.groups.get(timer.group_id)
        if group is None:
            return Outcome()
        if timer.kind is TimerKind.HEARTBEAT:
            return liveness.on_heartbeat_timer(group, timer, now_ms, self.config)
        if timer.kind is TimerKind.PENDING_MEMBER:
            return liveness.on_pending_member_timer(group, timer, now_ms)
        if timer.kind is TimerKind.JOIN:
            return rebalance.on_join_timer(group, timer, now_ms, self.config)
        return syncing.on_sync_timer(group, timer, now_ms, self.config)

    def on_written(self, write: Write, error: ErrorCode, now_ms: int) -> Outcome:
        """A write from an Outcome was replicated (error none) or failed."""
        if isinstance(write, StoreOffsets):
            if (
                error == ErrorCode.none
                and self.status_error(write.group_id, empty_id_allowed=True) is not None
            ):
                # The partition moved away while the write was in flight: the new coordinator loads the
                # commit from the log; this one must not keep a group it no longer owns.
                error = ErrorCode.not_leader_or_follower
            return Outcome(replies=[offsets.on_offsets_stored(self.offsets, write, error)])
        group = self.groups.get(write.group_id)
        if isinstance(write, StoreGroup) and group is not None:
            return syncing.on_group_stored(group, write, error, now_ms, self.config)
        return Outcome()

    # ------------------------------------------------------------ leadership

    def begin_loading(self, partition: int) -> None:
        self.partitions[partition] = PartitionStatus.LOADING

    def finish_loading(
        self, partition: int, records: Iterable[tuple[bytes, bytes | None]], now_ms: int
    ) -> Outcome:
        """The partition's records up to its end, read after becoming leader. Then its groups are answered."""
        if self.partitions.get(partition) is not PartitionStatus.LOADING:
            return Outcome()  # unloaded while loading: leadership moved on again
        loaded, out = loader.load_partition(records, now_ms, self.config)
        for group_id, group in loaded.groups.items():
            assert self.partition_for(group_id) == partition, (group_id, partition)
            self.groups[group_id] = group
        for group_id, group_offsets in loaded.offsets.groups.items():
            self.offsets.groups[group_id] = group_offsets
        self.partitions[partition] = PartitionStatus.ACTIVE
        return out

    def unload(self, partition: int) -> Outcome:
        """No longer the partition's leader: forget its groups, answering every parked request with
        NOT_COORDINATOR so that members go and find the new coordinator (Kafka's onGroupUnloaded)."""
        self.partitions.pop(partition, None)
        out = Outcome()
        for group_id in [g for g in self.groups if self.partition_for(g) == partition]:
            for member in self.groups.pop(group_id).members.values():
                rebalance.answer_parked(member, ErrorCode.not_coordinator, out)
            self.offsets.remove_group(group_id)
        return out
