"""SyncGroup and the group writes it leads to (Kafka's handleSyncGroup, the storeGroup callbacks, and the
pending-sync expiry, DelayedSync).

The leader's SyncGroup carries the assignment. It is written to __consumer_offsets first (StoreGroup); only
once that write is replicated does the group become Stable and every member get its part, so a coordinator
that fails over never hands out an assignment it did not keep.
"""

from __future__ import annotations

import dataclasses

from kio.schema.errors import ErrorCode

from replog.coordinator.config import GroupCoordinatorConfig
from replog.coordinator.group import ClassicGroup, GroupState
from replog.coordinator.joining import update_member
from replog.coordinator.outcomes import (
    UNKNOWN_MEMBER_ID,
    AfterStore,
    JoinResult,
    Outcome,
    StoreGroup,
    SyncRequest,
    SyncResult,
    Timer,
)
from replog.coordinator.rebalance import (
    answer_parked,
    group_record,
    join_result,
    maybe_prepare_rebalance,
    prepare_rebalance,
    propagate_assignment,
    reset_and_propagate_assignment_error,
    schedule_heartbeat,
)

S = GroupState


def on_sync(group: ClassicGroup, request: SyncRequest, now_ms: int) -> Outcome:
    out = Outcome()
    error = _sync_error(group, request)
    if error is not None:
        out.replies.append(SyncResult(request.request_id, error))
        return out
    member = group.members[request.member_id]
    if group.is_(S.EMPTY):
        out.replies.append(SyncResult(request.request_id, ErrorCode.unknown_member_id))
    elif group.is_(S.PREPARING_REBALANCE):
        out.replies.append(SyncResult(request.request_id, ErrorCode.rebalance_in_progress))
    elif group.is_(S.COMPLETING_REBALANCE):
        if member.sync_request is not None:  # a retry on another connection replaces the first one
            out.replies.append(SyncResult(member.sync_request, ErrorCode.rebalance_in_progress))
        member.sync_request = request.request_id
        group.pending_sync.discard(member.member_id)
        if group.is_leader(member.member_id):
            # Members the leader left out get an empty assignment, as in Kafka.
            given = dict(request.assignments)
            assignments = {member_id: given.get(member_id, b"") for member_id in group.members}
            out.writes.append(
                StoreGroup(
                    group.group_id,
                    group.generation_id,
                    group_record(group, assignments),
                    AfterStore.PROPAGATE_ASSIGNMENT,
                )
            )
    else:
        assert group.is_(S.STABLE), group.state
        group.pending_sync.discard(member.member_id)
        out.replies.append(
            SyncResult(
                request.request_id,
                ErrorCode.none,
                group.protocol_type,
                group.protocol_name,
                member.assignment,
            )
        )
        schedule_heartbeat(group, member, member.session_timeout_ms, now_ms, out)
    return out


def _sync_error(group: ClassicGroup, request: SyncRequest) -> ErrorCode | None:
    if group.is_(S.DEAD):
        return ErrorCode.coordinator_not_available
    error = group.current_member_error(request.member_id, request.group_instance_id)
    if error is not None:
        return error
    if request.generation_id != group.generation_id:
        return ErrorCode.illegal_generation
    if request.protocol_type is not None and request.protocol_type != group.protocol_type:
        return ErrorCode.inconsistent_group_protocol
    if request.protocol_name is not None and request.protocol_name != group.protocol_name:
        return ErrorCode.inconsistent_group_protocol
    return None


def on_sync_timer(group: ClassicGroup, timer: Timer, now_ms: int, config: GroupCoordinatorConfig) -> Outcome:
    """Members that got their JoinGroup answer but never synced within the rebalance timeout are removed,
    and the group rebalances without them (Kafka's onExpirePendingSync)."""
    out = Outcome()
    if group.sync_deadline_ms != timer.deadline_ms:
        return out  # superseded: a new rebalance cleared or replaced it
    group.sync_deadline_ms = None
    if group.state not in (S.COMPLETING_REBALANCE, S.STABLE) or not group.pending_sync:
        return out
    for member_id in sorted(group.pending_sync):
        member = group.members[member_id]
        answer_parked(member, ErrorCode.unknown_member_id, out)
        group.remove(member_id)
    prepare_rebalance(group, now_ms, config, out)
    return out


# ---------------------------------------------------------------- writes


def store_error_for_client(error: ErrorCode) -> ErrorCode:
    """Kafka's mapping of a failed group write to what members are told (GroupMetadataManager.storeGroup)."""
    if error in (
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
    ):
        return ErrorCode.coordinator_not_available
    if error in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
        return ErrorCode.not_coordinator
    if error in (ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.invalid_fetch_size):
        return ErrorCode.unknown_server_error
    return error


def on_group_stored(
    group: ClassicGroup, write: StoreGroup, error: ErrorCode, now_ms: int, config: GroupCoordinatorConfig
) -> Outcome:
    """A StoreGroup write finished: replicated (error none) or failed."""
    out = Outcome()
    error = store_error_for_client(error)
    if write.after is AfterStore.PROPAGATE_ASSIGNMENT:
        # Another member may have joined while the write was in flight; then this generation is over.
        if group.is_(S.COMPLETING_REBALANCE) and group.generation_id == write.generation_id:
            if error != ErrorCode.none:
                reset_and_propagate_assignment_error(group, error, now_ms, out)
                maybe_prepare_rebalance(group, now_ms, config, out)
            else:
                assignments = {m.member_id: m.assignment for m in write.value.members}
                for member in group.members.values():
                    member.assignment = assignments.get(member.member_id, b"")
                propagate_assignment(group, ErrorCode.none, now_ms, out)
                group.transition_to(S.STABLE, now_ms)
    elif write.after is AfterStore.ANSWER_STATIC_REJOIN:
        _answer_static_rejoin(group, write, error, now_ms, out)
    return out


def _answer_static_rejoin(
    group: ClassicGroup, write: StoreGroup, error: ErrorCode, now_ms: int, out: Outcome
) -> None:
    rejoin = write.static_rejoin
    assert rejoin is not None
    member = group.members.get(rejoin.new_member_id)
    if member is None or member.join_request != rejoin.request_id:
        return  # replaced or removed meanwhile: its JoinGroup was answered then
    if not group.is_(S.STABLE) or group.generation_id != write.generation_id:
        return  # a rebalance began meanwhile: the JoinGroup now waits for it, like any other member's
    if error != ErrorCode.none:
        # The new id is not in the log: go back to the old one, which a restart would load.
        member.join_request = None
        update_member(
            member,
            rejoin.old_protocols,
            rejoin.old_rebalance_timeout_ms,
            rejoin.old_session_timeout_ms,
            None,
            out,
        )
        old = group.replace_static_member(rejoin.instance_id, rejoin.new_member_id, rejoin.old_member_id)
        schedule_heartbeat(group, old, old.session_timeout_ms, now_ms, out)
        out.replies.append(
            JoinResult(
                rejoin.request_id,
                error,
                UNKNOWN_MEMBER_ID,
                group.generation_id,
                group.protocol_type,
                group.protocol_name,
                rejoin.leader_before or "",
            )
        )
        return
    member.join_request = None
    if rejoin.support_skipping_assignment:
        # JoinGroup v9+: a static leader learns it leads, but skips the assignor: the group is Stable and
        # would ignore a new assignment anyway.
        is_leader = group.is_leader(member.member_id)
        out.replies.append(join_result(group, member, rejoin.request_id, skip_assignment=is_leader))
    else:
        # Older clients get the old leader id, so that a returning leader does not run the assignor for an
        # assignment a Stable group would never send out.
        reply = join_result(group, member, rejoin.request_id, leader_id=rejoin.leader_before)
        out.replies.append(dataclasses.replace(reply, members=()))
