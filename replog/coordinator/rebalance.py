"""The rebalance itself: prepare it, complete the join phase, propagate assignments, remove members, and the
rebalance timers (Kafka's GroupCoordinator prepareRebalance, onCompleteJoin, DelayedJoin, InitialDelayedJoin,
propagateAssignment, removeMemberAndUpdateGroup).

Every function changes the group in place and appends what the shell must do to `out`. Nothing here reads
a clock: the caller passes now_ms. Kafka's purgatory "tries to complete" a DelayedJoin after every change;
here maybe_complete_join is that call, made after every change that could let the join phase finish.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from replog.coordinator.config import GroupCoordinatorConfig
from replog.coordinator.group import ClassicGroup, GroupState, JoinTimer, Member
from replog.coordinator.outcomes import (
    UNKNOWN_MEMBER_ID,
    AfterStore,
    JoinResult,
    Outcome,
    StoreGroup,
    SyncResult,
    Timer,
    TimerKind,
)
from replog.coordinator.records import GroupMetadataValue, MemberMetadataValue

S = GroupState

# ----------------------------------------------------------------- timers


def schedule_heartbeat(
    group: ClassicGroup, member: Member, timeout_ms: int, now_ms: int, out: Outcome
) -> None:
    """Kafka's completeAndScheduleNextExpiration: the member is alive now; it must show life again before
    timeout_ms passes (a heartbeat, a join, a sync, a commit) or be removed."""
    member.heartbeat_deadline_ms = now_ms + timeout_ms
    out.timers.append(
        Timer(TimerKind.HEARTBEAT, group.group_id, member.member_id, member.heartbeat_deadline_ms)
    )


def set_join_timer(group: ClassicGroup, timer: JoinTimer, out: Outcome) -> None:
    group.join_timer = timer
    out.timers.append(Timer(TimerKind.JOIN, group.group_id, "", timer.deadline_ms))


def set_sync_timer(group: ClassicGroup, now_ms: int, out: Outcome) -> None:
    """Kafka's DelayedSync: members that got their JoinGroup answer have the rebalance timeout to sync."""
    group.sync_deadline_ms = now_ms + group.rebalance_timeout_ms()
    out.timers.append(Timer(TimerKind.SYNC, group.group_id, "", group.sync_deadline_ms))


def on_join_timer(group: ClassicGroup, timer: Timer, now_ms: int, config: GroupCoordinatorConfig) -> Outcome:
    """The rebalance timer fired: extend the initial delay while members keep arriving (InitialDelayedJoin),
    else finish the join phase with whoever rejoined (DelayedJoin's expiry)."""
    out = Outcome()
    current = group.join_timer
    if current is None or current.deadline_ms != timer.deadline_ms or not group.is_(S.PREPARING_REBALANCE):
        return out  # superseded, or the join phase already completed
    if current.initial and group.new_member_added and current.remaining_ms != 0:
        # Kafka's arithmetic, kept exactly: the next round waits min(delay, remaining) and leaves
        # remaining - (this round's delay), so the whole wait never passes the rebalance timeout.
        group.new_member_added = False
        delay = min(config.group_initial_rebalance_delay_ms, current.remaining_ms)
        remaining = max(current.remaining_ms - current.delay_ms, 0)
        set_join_timer(group, JoinTimer(now_ms + delay, True, delay, remaining), out)
        return out
    complete_join(group, now_ms, out)
    return out


# -------------------------------------------------------------- rebalance


def maybe_prepare_rebalance(
    group: ClassicGroup, now_ms: int, config: GroupCoordinatorConfig, out: Outcome
) -> None:
    if group.can_rebalance():
        prepare_rebalance(group, now_ms, config, out)


def prepare_rebalance(group: ClassicGroup, now_ms: int, config: GroupCoordinatorConfig, out: Outcome) -> None:
    """Start a rebalance: members awaiting an assignment are told to rejoin, and the join phase begins."""
    if group.is_(S.COMPLETING_REBALANCE):
        reset_and_propagate_assignment_error(group, ErrorCode.rebalance_in_progress, now_ms, out)
    group.pending_sync.clear()
    group.sync_deadline_ms = None
    if group.is_(S.EMPTY):
        # A new group waits group.initial.rebalance.delay.ms for more members before the first generation,
        # so that consumers starting together do not cause one rebalance each.
        delay = config.group_initial_rebalance_delay_ms
        timer = JoinTimer(now_ms + delay, True, delay, max(group.rebalance_timeout_ms() - delay, 0))
    else:
        timer = JoinTimer(now_ms + group.rebalance_timeout_ms(), False)
    group.transition_to(S.PREPARING_REBALANCE, now_ms)
    set_join_timer(group, timer, out)
    maybe_complete_join(group, now_ms, out)


def maybe_complete_join(group: ClassicGroup, now_ms: int, out: Outcome) -> None:
    """DelayedJoin.tryComplete: done early once every member has rejoined and no KIP-394 member id is still
    outstanding. The initial delay never completes early."""
    timer = group.join_timer
    if group.is_(S.PREPARING_REBALANCE) and timer is not None and not timer.initial:
        if group.has_all_members_joined():
            complete_join(group, now_ms, out)


def complete_join(group: ClassicGroup, now_ms: int, out: Outcome) -> None:
    """Kafka's onCompleteJoin: drop dynamic members that did not rejoin, start the next generation, and
    answer every parked JoinGroup (the leader gets all members' metadata to assign from)."""
    assert group.is_(S.PREPARING_REBALANCE), group.state
    group.join_timer = None
    for member in group.not_yet_rejoined():
        if not member.is_static:  # a static member keeps its place across restarts (KIP-345)
            answer_parked(member, ErrorCode.unknown_member_id, out)
            group.remove(member.member_id)
    if not group.maybe_elect_new_joined_leader() and group.members:
        # Only static members that did not rejoin are left: wait another rebalance timeout; their sessions
        # expire meanwhile if they are really gone.
        set_join_timer(group, JoinTimer(now_ms + group.rebalance_timeout_ms(), False), out)
        return
    group.init_next_generation(now_ms)
    if group.is_(S.EMPTY):
        out.writes.append(
            StoreGroup(group.group_id, group.generation_id, group_record(group, {}), AfterStore.NOTHING)
        )
        return
    for member in group.members.values():
        if member.join_request is not None:
            out.replies.append(join_result(group, member, member.join_request))
            member.join_request = None
        schedule_heartbeat(group, member, member.session_timeout_ms, now_ms, out)
        member.is_new = False
        group.pending_sync.add(member.member_id)
    set_sync_timer(group, now_ms, out)


def join_result(
    group: ClassicGroup,
    member: Member,
    request_id: int,
    *,
    skip_assignment: bool = False,
    leader_id: str | None = None,
) -> JoinResult:
    """The current generation as JoinGroup answers it; only the leader gets the members' metadata."""
    is_leader = group.is_leader(member.member_id)
    return JoinResult(
        request_id,
        ErrorCode.none,
        member.member_id,
        group.generation_id,
        group.protocol_type,
        group.protocol_name,
        (group.leader_id if leader_id is None else leader_id) or "",
        skip_assignment,
        group.member_metadata_for_leader() if is_leader else (),
    )


# ------------------------------------------------------------- assignment


def reset_and_propagate_assignment_error(
    group: ClassicGroup, error: ErrorCode, now_ms: int, out: Outcome
) -> None:
    assert group.is_(S.COMPLETING_REBALANCE), group.state
    for member in group.members.values():
        member.assignment = b""
    propagate_assignment(group, error, now_ms, out)


def propagate_assignment(group: ClassicGroup, error: ErrorCode, now_ms: int, out: Outcome) -> None:
    """Answer every parked SyncGroup, and restart those members' session timers: a session that ran out
    while they waited for the leader or the write was ignored, and no later one was scheduled."""
    ok = error == ErrorCode.none
    for member in group.members.values():
        if member.sync_request is None:
            continue
        out.replies.append(
            SyncResult(
                member.sync_request,
                error,
                group.protocol_type if ok else None,
                group.protocol_name if ok else None,
                member.assignment,
            )
        )
        member.sync_request = None
        schedule_heartbeat(group, member, member.session_timeout_ms, now_ms, out)


def group_record(group: ClassicGroup, assignments: dict[str, bytes]) -> GroupMetadataValue:
    """The group's GroupMetadataValue: each member with its metadata for the chosen protocol (subscription)
    and its assignment."""
    members = tuple(
        MemberMetadataValue(
            m.member_id,
            m.client_id,
            m.client_host,
            m.session_timeout_ms,
            m.metadata(group.protocol_name) if group.protocol_name is not None else b"",
            assignments.get(m.member_id, b""),
            m.rebalance_timeout_ms,
            m.group_instance_id,
        )
        for m in group.members.values()
    )
    return GroupMetadataValue(
        group.protocol_type or "",
        group.generation_id,
        group.protocol_name,
        group.leader_id,
        members,
        group.state_timestamp_ms,
    )


# ----------------------------------------------------------------- removal


def answer_parked(member: Member, error: ErrorCode, out: Outcome) -> None:
    """Answer whatever the member has parked: a removed member's requests must not wait forever."""
    if member.join_request is not None:
        out.replies.append(JoinResult(member.join_request, error, UNKNOWN_MEMBER_ID))
        member.join_request = None
    if member.sync_request is not None:
        out.replies.append(SyncResult(member.sync_request, error))
        member.sync_request = None


def remove_member_and_update_group(
    group: ClassicGroup, member: Member, now_ms: int, config: GroupCoordinatorConfig, out: Outcome
) -> None:
    """A member left or expired: a settled group rebalances, a rebalancing one may now finish joining."""
    answer_parked(member, ErrorCode.unknown_member_id, out)
    group.remove(member.member_id)
    if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
        maybe_prepare_rebalance(group, now_ms, config, out)
    elif group.is_(S.PREPARING_REBALANCE):
        maybe_complete_join(group, now_ms, out)


def remove_pending_member(group: ClassicGroup, member_id: str, now_ms: int, out: Outcome) -> None:
    group.remove(member_id)
    if group.is_(S.PREPARING_REBALANCE):
        maybe_complete_join(group, now_ms, out)
