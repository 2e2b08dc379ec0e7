"""Heartbeats, LeaveGroup and the member expiries (Kafka's handleHeartbeat, handleLeaveGroup,
onExpireHeartbeat and the pending-member expiry of KIP-394)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from replog.coordinator.config import GroupCoordinatorConfig
from replog.coordinator.group import ClassicGroup, GroupState
from replog.coordinator.outcomes import (
    UNKNOWN_MEMBER_ID,
    HeartbeatRequest,
    HeartbeatResult,
    LeaveRequest,
    LeaveResult,
    LeavingMember,
    Outcome,
    Timer,
)
from replog.coordinator.rebalance import (
    remove_member_and_update_group,
    remove_pending_member,
    schedule_heartbeat,
)

S = GroupState


def on_heartbeat(group: ClassicGroup, request: HeartbeatRequest, now_ms: int) -> Outcome:
    out = Outcome()
    error = _heartbeat_error(group, request)
    if error is None:
        if group.is_(S.EMPTY):
            error = ErrorCode.unknown_member_id
        else:
            member = group.members[request.member_id]
            schedule_heartbeat(group, member, member.session_timeout_ms, now_ms, out)
            # While rebalancing, the heartbeat answer is how members learn they must rejoin.
            rebalancing = group.is_(S.PREPARING_REBALANCE)
            error = ErrorCode.rebalance_in_progress if rebalancing else ErrorCode.none
    out.replies.append(HeartbeatResult(request.request_id, error))
    return out


def _heartbeat_error(group: ClassicGroup, request: HeartbeatRequest) -> ErrorCode | None:
    if group.is_(S.DEAD):
        return ErrorCode.coordinator_not_available
    error = group.current_member_error(request.member_id, request.group_instance_id)
    if error is not None:
        return error
    if request.generation_id != group.generation_id:
        return ErrorCode.illegal_generation
    return None


def on_leave(
    group: ClassicGroup, request: LeaveRequest, now_ms: int, config: GroupCoordinatorConfig
) -> Outcome:
    """Each leaving member gets its own error (LeaveGroup v3+ batches them; for v0-2 the handler puts the one
    member's error at the top level). An empty member id with an instance id is an admin's removal."""
    out = Outcome()
    if group.is_(S.DEAD):
        out.replies.append(LeaveResult(request.request_id, ErrorCode.coordinator_not_available))
        return out
    results = tuple((leaving, _leave_one(group, leaving, now_ms, config, out)) for leaving in request.members)
    out.replies.append(LeaveResult(request.request_id, ErrorCode.none, results))
    return out


def _leave_one(
    group: ClassicGroup, leaving: LeavingMember, now_ms: int, config: GroupCoordinatorConfig, out: Outcome
) -> ErrorCode:
    member_id = leaving.member_id
    if member_id == UNKNOWN_MEMBER_ID:
        current = group.static_members.get(leaving.group_instance_id) if leaving.group_instance_id else None
        if current is None:
            return ErrorCode.unknown_member_id
        remove_member_and_update_group(group, group.members[current], now_ms, config, out)
        return ErrorCode.none
    if member_id in group.pending_members:
        remove_pending_member(group, member_id, now_ms, out)
        return ErrorCode.none
    error = group.current_member_error(member_id, leaving.group_instance_id)
    if error is not None:
        return error
    remove_member_and_update_group(group, group.members[member_id], now_ms, config, out)
    return ErrorCode.none


def unknown_group_leave(request: LeaveRequest) -> LeaveResult:
    """LeaveGroup for a group this coordinator does not have: every member is unknown."""
    return LeaveResult(
        request.request_id,
        ErrorCode.none,
        tuple((leaving, ErrorCode.unknown_member_id) for leaving in request.members),
    )


def on_heartbeat_timer(
    group: ClassicGroup, timer: Timer, now_ms: int, config: GroupCoordinatorConfig
) -> Outcome:
    """A member's session ran out without a sign of life. A member waiting on a rebalance counts as alive
    (it cannot heartbeat with a parked request), unless it is new: a new member's join is bounded."""
    out = Outcome()
    member = group.members.get(timer.member_id)
    if member is None or member.heartbeat_deadline_ms != timer.deadline_ms or group.is_(S.DEAD):
        return out  # stale: the member heartbeated since, left, or was replaced
    member.heartbeat_deadline_ms = None
    if not member.is_new and (member.awaiting_join or member.awaiting_sync):
        return out  # the rebalance reschedules it when it answers the member
    remove_member_and_update_group(group, member, now_ms, config, out)
    return out


def on_pending_member_timer(group: ClassicGroup, timer: Timer, now_ms: int) -> Outcome:
    """A KIP-394 member id was never used to join: forget it, so the rebalance need not wait for it."""
    out = Outcome()
    if group.pending_members.get(timer.member_id) == timer.deadline_ms:
        remove_pending_member(group, timer.member_id, now_ms, out)
    return out
