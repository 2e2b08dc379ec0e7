"""JoinGroup (Kafka's handleJoinGroup and the do*JoinGroup paths): new members, KIP-394 member ids, KIP-345
static members, rejoins in every state, group.max.size and the session timeout bounds.

Group lookup and creation, and the coordinator-level checks (group id, loading, ownership), are the
caller's; `group` here is the group the join is for, created Empty if the member id was unknown.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from replog.coordinator.config import GroupCoordinatorConfig
from replog.coordinator.group import MEMBER_ID_DELIMITER, ClassicGroup, GroupState, Member, Protocols
from replog.coordinator.outcomes import (
    UNKNOWN_MEMBER_ID,
    AfterStore,
    JoinRequest,
    JoinResult,
    Outcome,
    StaticRejoin,
    StoreGroup,
    SyncResult,
    Timer,
    TimerKind,
)
from replog.coordinator.rebalance import (
    group_record,
    join_result,
    maybe_complete_join,
    maybe_prepare_rebalance,
    prepare_rebalance,
    schedule_heartbeat,
)

S = GroupState


def on_join(
    group: ClassicGroup, request: JoinRequest, now_ms: int, config: GroupCoordinatorConfig, fresh_uuid: str
) -> Outcome:
    """`fresh_uuid` is a random UUID the caller drew; it becomes part of a new member id if one is needed."""
    assert group.group_id == request.group_id
    out = Outcome()
    error = _join_refusal(group, request, config)
    if error is not None:
        if error == ErrorCode.group_max_size_reached:
            # Kafka drops the refused member too: when the limit was lowered, the last ones to rejoin go.
            _drop_refused_member(group, request.member_id, now_ms, out)
        member_id = request.member_id if error == ErrorCode.invalid_session_timeout else UNKNOWN_MEMBER_ID
        out.replies.append(JoinResult(request.request_id, error, member_id))
        return out
    if request.member_id == UNKNOWN_MEMBER_ID:
        _new_member_join(group, request, now_ms, config, fresh_uuid, out)
    else:
        _current_member_join(group, request, now_ms, config, out)
    if group.is_(S.PREPARING_REBALANCE):
        maybe_complete_join(group, now_ms, out)
    return out


def _join_refusal(
    group: ClassicGroup, request: JoinRequest, config: GroupCoordinatorConfig
) -> ErrorCode | None:
    """Errors that refuse a join before it touches the group."""
    if (
        not config.group_min_session_timeout_ms
        <= request.session_timeout_ms
        <= config.group_max_session_timeout_ms
    ):
        return ErrorCode.invalid_session_timeout
    if (
        sum(len(name) + len(metadata) for name, metadata in request.protocols)
        > config.group_max_member_metadata_bytes
    ):
        return ErrorCode.invalid_request  # replog's bound; see GroupCoordinatorConfig
    if not _accepts_joining_member(group, request.member_id, config):
        return ErrorCode.group_max_size_reached
    if (
        request.member_id == UNKNOWN_MEMBER_ID
        and request.group_instance_id is None
        and request.require_known_member_id
        and len(group.pending_members) >= config.group_max_size
    ):
        # replog's bound on a flood of first joins: each would park a KIP-394 member id for a session timeout.
        return ErrorCode.group_max_size_reached
    return None


def _accepts_joining_member(group: ClassicGroup, member_id: str, config: GroupCoordinatorConfig) -> bool:
    """Kafka's acceptJoiningMember: while rebalancing, count members that rejoined (the group may already be
    over a lowered limit); once settled, count members."""
    if group.state in (S.EMPTY, S.DEAD):
        return True
    if group.is_(S.PREPARING_REBALANCE):
        member = group.members.get(member_id)
        return (
            member is not None and member.awaiting_join
        ) or group.num_awaiting_join < config.group_max_size
    return group.has(member_id) or group.size < config.group_max_size


def _drop_refused_member(group: ClassicGroup, member_id: str, now_ms: int, out: Outcome) -> None:
    member = group.members.get(member_id)
    if member is not None:
        # Only a rebalancing group refuses a known member, one that has not rejoined (and so parks nothing).
        assert group.is_(S.PREPARING_REBALANCE) and not member.awaiting_join, (group.state, member)
        group.remove(member_id)
        maybe_complete_join(group, now_ms, out)


def _inconsistent(group: ClassicGroup, request: JoinRequest) -> bool:
    return not group.supports_protocols(request.protocol_type, {name for name, _ in request.protocols})


# --------------------------------------------------------------- new members


def _new_member_join(
    group: ClassicGroup,
    request: JoinRequest,
    now_ms: int,
    config: GroupCoordinatorConfig,
    fresh_uuid: str,
    out: Outcome,
) -> None:
    if group.is_(S.DEAD):
        out.replies.append(
            JoinResult(request.request_id, ErrorCode.coordinator_not_available, UNKNOWN_MEMBER_ID)
        )
        return
    if _inconsistent(group, request):
        out.replies.append(
            JoinResult(request.request_id, ErrorCode.inconsistent_group_protocol, UNKNOWN_MEMBER_ID)
        )
        return
    prefix = request.group_instance_id if request.group_instance_id is not None else request.client_id
    new_member_id = prefix + MEMBER_ID_DELIMITER + fresh_uuid
    instance_id = request.group_instance_id
    if instance_id is not None and instance_id in group.static_members:
        _replace_static_member(
            group, request, group.static_members[instance_id], new_member_id, now_ms, config, out
        )
    elif instance_id is None and request.require_known_member_id:
        # KIP-394: hand out the id and make the member come back with it, so that a client that times out
        # and retries does not leave a defunct member behind for every attempt.
        deadline = now_ms + request.session_timeout_ms
        group.pending_members[new_member_id] = deadline
        out.timers.append(Timer(TimerKind.PENDING_MEMBER, group.group_id, new_member_id, deadline))
        out.replies.append(JoinResult(request.request_id, ErrorCode.member_id_required, new_member_id))
    else:
        _add_member_and_rebalance(group, request, new_member_id, now_ms, config, out)


def _add_member_and_rebalance(
    group: ClassicGroup,
    request: JoinRequest,
    member_id: str,
    now_ms: int,
    config: GroupCoordinatorConfig,
    out: Outcome,
) -> None:
    member = Member(
        member_id,
        request.group_instance_id,
        request.client_id,
        request.client_host,
        request.rebalance_timeout_ms,
        request.session_timeout_ms,
        request.protocol_type,
        request.protocols,
        join_request=request.request_id,
        is_new=True,
    )
    if group.is_(S.PREPARING_REBALANCE) and group.generation_id == 0:
        group.new_member_added = True  # extends the initial delay (InitialDelayedJoin)
    group.add(member)
    # A new member cannot heartbeat before it learns its id, and its parked JoinGroup hides a disconnect, so
    # its join is bounded on its own; if it is still there, the client retries.
    schedule_heartbeat(group, member, config.group_new_member_join_timeout_ms, now_ms, out)
    maybe_prepare_rebalance(group, now_ms, config, out)


# ----------------------------------------------------------- static members


def _replace_static_member(
    group: ClassicGroup,
    request: JoinRequest,
    old_member_id: str,
    new_member_id: str,
    now_ms: int,
    config: GroupCoordinatorConfig,
    out: Outcome,
) -> None:
    """KIP-345: a known group.instance.id joins without a member id (a restarted instance). It takes over the
    old member's place under a new id; the old id is fenced. A Stable group keeps its assignment if the
    protocol it would choose does not change, after the new id is written to the log."""
    assert request.group_instance_id is not None
    leader_before = group.leader_id
    old = group.members[old_member_id]
    _answer_parked_fenced(old, out)
    member = group.replace_static_member(request.group_instance_id, old_member_id, new_member_id)
    schedule_heartbeat(group, member, member.session_timeout_ms, now_ms, out)
    rejoin = StaticRejoin(
        request.request_id,
        request.group_instance_id,
        old_member_id,
        new_member_id,
        member.protocols,
        member.rebalance_timeout_ms,
        member.session_timeout_ms,
        leader_before,
        request.support_skipping_assignment,
    )
    update_member(
        member,
        request.protocols,
        request.rebalance_timeout_ms,
        request.session_timeout_ms,
        request.request_id,
        out,
    )
    if group.is_(S.STABLE):
        if group.select_protocol() == group.protocol_name:
            assignments = {m.member_id: m.assignment for m in group.members.values()}
            out.writes.append(
                StoreGroup(
                    group.group_id,
                    group.generation_id,
                    group_record(group, assignments),
                    AfterStore.ANSWER_STATIC_REJOIN,
                    rejoin,
                )
            )
        else:
            maybe_prepare_rebalance(group, now_ms, config, out)
    elif group.is_(S.COMPLETING_REBALANCE):
        # The leader may be assigning to the old id; rebalance so the new id gets an assignment.
        prepare_rebalance(group, now_ms, config, out)
    else:
        assert group.is_(S.PREPARING_REBALANCE), group.state  # it simply waits with the others


def _answer_parked_fenced(member: Member, out: Outcome) -> None:
    if member.join_request is not None:
        out.replies.append(JoinResult(member.join_request, ErrorCode.fenced_instance_id, member.member_id))
        member.join_request = None
    if member.sync_request is not None:
        out.replies.append(SyncResult(member.sync_request, ErrorCode.fenced_instance_id))
        member.sync_request = None


# ---------------------------------------------------------- current members


def _current_member_join(
    group: ClassicGroup, request: JoinRequest, now_ms: int, config: GroupCoordinatorConfig, out: Outcome
) -> None:
    member_id = request.member_id
    if group.is_(S.DEAD):
        out.replies.append(JoinResult(request.request_id, ErrorCode.coordinator_not_available, member_id))
    elif _inconsistent(group, request):
        out.replies.append(JoinResult(request.request_id, ErrorCode.inconsistent_group_protocol, member_id))
    elif member_id in group.pending_members:
        if request.group_instance_id is not None:
            # A KIP-394 id belongs to a dynamic member; Kafka throws IllegalStateException here.
            out.replies.append(JoinResult(request.request_id, ErrorCode.invalid_request, member_id))
        else:
            _add_member_and_rebalance(group, request, member_id, now_ms, config, out)
    elif (error := group.current_member_error(member_id, request.group_instance_id)) is not None:
        out.replies.append(JoinResult(request.request_id, error, member_id))
    else:
        _known_member_rejoin(group, group.members[member_id], request, now_ms, config, out)


def _known_member_rejoin(
    group: ClassicGroup,
    member: Member,
    request: JoinRequest,
    now_ms: int,
    config: GroupCoordinatorConfig,
    out: Outcome,
) -> None:
    same = member.matches(request.protocols)
    if group.is_(S.PREPARING_REBALANCE):
        _update_member_and_rebalance(group, member, request, now_ms, config, out)
    elif group.is_(S.COMPLETING_REBALANCE) and same:
        # It missed its JoinGroup answer: give it the current generation again.
        out.replies.append(join_result(group, member, request.request_id))
    elif group.is_(S.STABLE) and same and not group.is_leader(member.member_id):
        # A follower with nothing new may go on to SyncGroup. A leader's rejoin always rebalances: it is how
        # the leader asks for a new assignment when something outside the metadata changed (topics).
        out.replies.append(join_result(group, member, request.request_id))
    elif group.state in (S.COMPLETING_REBALANCE, S.STABLE):
        _update_member_and_rebalance(group, member, request, now_ms, config, out)
    else:
        # Empty or Dead with members cannot happen; let the member reset and rejoin as Kafka does.
        out.replies.append(JoinResult(request.request_id, ErrorCode.unknown_member_id, member.member_id))


def _update_member_and_rebalance(
    group: ClassicGroup,
    member: Member,
    request: JoinRequest,
    now_ms: int,
    config: GroupCoordinatorConfig,
    out: Outcome,
) -> None:
    update_member(
        member,
        request.protocols,
        request.rebalance_timeout_ms,
        request.session_timeout_ms,
        request.request_id,
        out,
    )
    maybe_prepare_rebalance(group, now_ms, config, out)


def update_member(
    member: Member,
    protocols: Protocols,
    rebalance_timeout_ms: int,
    session_timeout_ms: int,
    join_request: int | None,
    out: Outcome,
) -> None:
    """New protocols and timeouts, and the JoinGroup now parked for the member (None: none). A JoinGroup it
    parked before is answered now: the client gave up on it and retried on another connection."""
    if member.join_request is not None and member.join_request != join_request:
        out.replies.append(JoinResult(member.join_request, ErrorCode.rebalance_in_progress, member.member_id))
    member.protocols = protocols
    member.rebalance_timeout_ms = rebalance_timeout_ms
    member.session_timeout_ms = session_timeout_ms
    member.join_request = join_request
