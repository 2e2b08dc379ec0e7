"""The classic group protocol end to end through the sans-IO coordinator: join/sync rounds, the initial
rebalance delay, members that leave, expire or do not rejoin, KIP-394 member ids and KIP-345 static members.
No event loop: a fake shell (group_shell.py) carries out the timers and writes."""

import pytest
from kio.schema.errors import ErrorCode

from replog.coordinator.group import GroupState
from replog.coordinator.outcomes import JoinResult, LeavingMember, SyncResult, Timer, TimerKind

from .group_shell import REBALANCE_MS, SESSION_MS, Shell

E = ErrorCode
S = GroupState


@pytest.mark.parametrize("size", [1, 3], ids=["one member", "three members"])
def test_a_full_join_and_sync_round_makes_the_group_stable(size):
    shell = Shell()
    members = [shell.join_new() for _ in range(size)]
    assert all(shell.pending(rid) for _, rid in members)  # parked for the initial delay
    assert shell.group.state is S.PREPARING_REBALANCE
    shell.advance(3000)
    if size > 1:
        # Members kept arriving during the delay, so it was extended once more.
        assert all(shell.pending(rid) for _, rid in members)
        shell.advance(3000)
    results = [shell.answered(rid) for _, rid in members]
    leader = members[0][0]
    assert {(r.error, r.generation_id, r.leader_id, r.protocol_name) for r in results} == {
        (E.none, 1, leader, "range")
    }
    assert [len(r.members) for r in results] == [size] + [0] * (size - 1)  # only the leader sees them
    assert shell.group.state is S.COMPLETING_REBALANCE

    followers = [shell.sync(m, 1) for m, _ in members[1:]]
    assert all(shell.pending(rid) for rid in followers)  # they wait for the leader's assignment
    lead = shell.sync(leader, 1, [(m, f"a-{m}".encode()) for m, _ in members])
    assert shell.group.state is S.STABLE
    for (member_id, _), rid in zip(members, [lead] + followers, strict=True):
        assert shell.answered(rid) == SyncResult(rid, E.none, "consumer", "range", f"a-{member_id}".encode())
    assert shell.answered(shell.heartbeat(leader, 1)).error == E.none
    # The assignment went to the log before anyone got it.
    assert len(shell.log) == 1


def test_the_initial_delay_never_outlasts_the_rebalance_timeout():
    shell = Shell()
    shell.join_new(rebalance_ms=7000)
    while True:  # a member arrives in every round of the delay
        shell.advance(2999)
        if shell.group.state is not S.PREPARING_REBALANCE:
            break
        shell.join_new(rebalance_ms=7000)
    # Rounds of 3000, min(3000, 7000 - 3000) and then the 1000 left: the join completes at the rebalance
    # timeout, not one delay after the last arrival.
    assert shell.group.state is S.COMPLETING_REBALANCE
    assert shell.group.state_timestamp_ms == 7000
    assert shell.group.size == 3


def test_a_member_that_leaves_triggers_a_rebalance_of_the_rest():
    shell = Shell()
    leader, second, third = shell.stable_group(3)
    done = shell.leave(LeavingMember(third))
    assert shell.answered(done).members == ((LeavingMember(third), E.none),)
    assert shell.group.state is S.PREPARING_REBALANCE
    assert shell.answered(shell.heartbeat(second, 1)).error == E.rebalance_in_progress
    a = shell.join(leader)
    assert shell.pending(a)
    b = shell.join(second)
    # Everyone left has rejoined: no need to wait for the rebalance timeout.
    assert shell.answered(a).generation_id == shell.answered(b).generation_id == 2
    assert {m for m, _, _ in shell.answered(a).members} == {leader, second}
    assert shell.answered(shell.heartbeat(third, 1)).error == E.unknown_member_id


def test_a_member_whose_session_expires_is_removed_and_the_group_rebalances():
    shell = Shell()
    leader, follower = shell.stable_group(2)
    errors = []
    for _ in range(3):
        shell.advance(SESSION_MS // 2)
        errors.append(shell.answered(shell.heartbeat(leader, 1)).error)
    # The follower's session ran out at the second heartbeat; the leader learns of the rebalance from it.
    assert errors == [E.none, E.rebalance_in_progress, E.rebalance_in_progress]
    assert follower not in shell.group.members
    assert shell.group.state is S.PREPARING_REBALANCE
    rejoin = shell.join(leader)
    assert shell.answered(rejoin).generation_id == 2
    assert [m for m, _, _ in shell.answered(rejoin).members] == [leader]


def test_heartbeats_keep_a_stable_group_alive_indefinitely():
    shell = Shell()
    members = shell.stable_group(2)
    for _ in range(10):
        shell.advance(SESSION_MS - 1)
        for m in members:
            assert shell.answered(shell.heartbeat(m, 1)).error == E.none
    assert shell.group.state is S.STABLE
    assert set(shell.group.members) == set(members)


def test_the_rebalance_timeout_removes_members_that_did_not_rejoin():
    shell = Shell()
    leader, second, third = shell.stable_group(3)
    a = shell.join(leader)  # the leader's rejoin starts a rebalance
    b = shell.join(second)
    assert shell.pending(a) and shell.pending(b)
    for _ in range(REBALANCE_MS // (SESSION_MS // 2)):
        shell.advance(SESSION_MS // 2)
        shell.heartbeat(third, 1)  # alive, but never rejoins
    assert third not in shell.group.members
    assert shell.answered(a).generation_id == 2
    assert {m for m, _, _ in shell.answered(a).members} == {leader, second}


def test_a_leader_that_never_syncs_is_removed_after_the_rebalance_timeout():
    shell = Shell()
    member_a, rid_a = shell.join_new()
    member_b, _ = shell.join_new()
    shell.advance(6000)
    leader = shell.answered(rid_a).leader_id
    other = member_b if leader == member_a else member_a
    waiting = shell.sync(other, 1)
    for _ in range(REBALANCE_MS // 5000):
        shell.advance(5000)
        shell.heartbeat(leader, 1)  # alive, but never sends the assignment
    # The sync deadline dropped the leader; the member that synced is told to rejoin.
    assert leader not in shell.group.members
    assert shell.group.state is S.PREPARING_REBALANCE
    assert shell.answered(waiting) == SyncResult(waiting, E.rebalance_in_progress)


def test_a_new_member_during_a_stable_generation_gets_everyone_to_rejoin():
    shell = Shell()
    leader, follower = shell.stable_group(2)
    newcomer, rid = shell.join_new()
    assert shell.group.state is S.PREPARING_REBALANCE
    assert shell.answered(shell.heartbeat(follower, 1)).error == E.rebalance_in_progress
    shell.join(leader)
    shell.join(follower)
    assert shell.answered(rid).generation_id == 2
    assert shell.group.size == 3


def test_a_rebalance_while_completing_tells_waiting_members_to_rejoin():
    shell = Shell()
    a, rid_a = shell.join_new()
    b, rid_b = shell.join_new()
    shell.advance(6000)
    follower = b if shell.answered(rid_a).leader_id == a else a
    waiting = shell.sync(follower, 1)
    shell.join_new()  # a third member: the leader's assignment would be for the old member list
    assert shell.answered(waiting) == SyncResult(waiting, E.rebalance_in_progress)


def test_a_failed_assignment_write_is_reported_and_the_group_rebalances():
    shell = Shell()
    member, rid = shell.join_new()
    shell.advance(3000)
    shell.hold_writes = True
    sync = shell.sync(member, 1, [(member, b"x")])
    assert shell.pending(sync)
    shell.release(E.not_leader_or_follower)
    assert shell.answered(sync) == SyncResult(sync, E.not_coordinator)
    assert shell.group.state is S.PREPARING_REBALANCE


# ------------------------------------------------------------------------------- KIP-394 member ids


def test_a_first_join_gets_member_id_required_and_the_id_to_rejoin_with():
    shell = Shell()
    rid = shell.join(client="consumer-1")
    reply = shell.answered(rid)
    assert reply == JoinResult(rid, E.member_id_required, "consumer-1-u1")
    assert shell.group.pending_members and not shell.group.members
    again = shell.join(reply.member_id, client="consumer-1")
    assert shell.pending(again)
    assert "consumer-1-u1" in shell.group.members


def test_an_unused_member_id_expires_after_the_session_timeout():
    shell = Shell()
    member_id = shell.answered(shell.join(session_ms=7000)).member_id
    shell.advance(7000)
    assert not shell.group.pending_members
    assert shell.answered(shell.join(member_id)).error == E.unknown_member_id


def test_a_rebalance_waits_for_handed_out_member_ids():
    shell = Shell()
    leader, follower = shell.stable_group(2)
    shell.join()  # MEMBER_ID_REQUIRED: a member is coming
    a = shell.join(leader)
    b = shell.join(follower)
    assert shell.pending(a) and shell.pending(b)
    shell.advance(SESSION_MS)  # the id was never used: stop waiting for it
    assert shell.answered(a).generation_id == 2


def test_a_client_before_join_group_v4_joins_in_one_step():
    shell = Shell()
    rid = shell.join(require_known=False)
    shell.advance(3000)
    assert shell.answered(rid).error == E.none
    assert shell.answered(rid).member_id == "c-u1"


# -------------------------------------------------------------------------------- KIP-345 static


def test_a_restarted_static_member_takes_over_its_place_without_a_rebalance():
    shell = Shell()
    leader, follower = shell.stable_group(2, static=True)
    old = shell.group.members[follower]
    instance = old.group_instance_id
    rid = shell.join(instance=instance)  # restarted: no member id
    reply = shell.answered(rid)
    assert reply.error == E.none and reply.member_id != follower
    assert (reply.generation_id, reply.leader_id, reply.members) == (1, leader, ())
    assert shell.group.state is S.STABLE
    assert shell.group.members[reply.member_id].assignment == old.assignment
    # The old incarnation is fenced.
    assert shell.answered(shell.heartbeat(follower, 1, instance=instance)).error == E.fenced_instance_id
    assert shell.answered(shell.heartbeat(reply.member_id, 1, instance=instance)).error == E.none
    # The new member id went to the log, so a new coordinator knows it.
    assert len(shell.log) == 2


@pytest.mark.parametrize(
    ("skip_assignment", "expected_leader", "expected_skip", "sees_members"),
    [
        (False, "old leader id", False, False),  # before v9: a returning leader must not run the assignor
        (True, "new member id", True, True),  # v9+: told it leads, and to skip the assignment
    ],
    ids=[
        "a static leader rejoining before v9 is told the old leader id",
        "a static leader rejoining on v9 is told to skip the assignment",
    ],
)
def test_a_restarted_static_leader(skip_assignment, expected_leader, expected_skip, sees_members):
    shell = Shell()
    leader, _ = shell.stable_group(2, static=True)
    instance = shell.group.members[leader].group_instance_id
    reply = shell.answered(shell.join(instance=instance, skip_assignment=skip_assignment))
    leader_id = {"old leader id": leader, "new member id": reply.member_id}[expected_leader]
    assert (reply.leader_id, reply.skip_assignment, bool(reply.members)) == (
        leader_id,
        expected_skip,
        sees_members,
    )
    assert shell.group.leader_id == reply.member_id


def test_a_static_rejoin_whose_write_fails_keeps_the_old_member_id():
    shell = Shell()
    _, follower = shell.stable_group(2, static=True)
    instance = shell.group.members[follower].group_instance_id
    shell.hold_writes = True
    rid = shell.join(instance=instance)
    shell.release(E.request_timed_out)
    assert shell.answered(rid).error == E.coordinator_not_available
    assert shell.group.static_members[instance] == follower
    assert shell.answered(shell.heartbeat(follower, 1, instance=instance)).error == E.none


def test_a_static_rejoin_overtaken_by_a_rebalance_is_answered_by_the_rebalance():
    shell = Shell()
    leader, follower = shell.stable_group(2, static=True)
    shell.hold_writes = True
    rid = shell.join(instance="i-1")  # its new id is being written...
    shell.join(leader, instance="i-0")  # ...when the leader starts a rebalance
    shell.release()
    assert shell.answered(rid).generation_id == 2  # not the Stable generation 1 the write was for
    assert shell.group.state is S.COMPLETING_REBALANCE


def test_a_static_member_restarting_before_it_synced_owes_the_sync_under_its_new_id():
    shell = Shell()
    rid_a = shell.join(instance="i-0")
    rid_b = shell.join(instance="i-1")
    shell.advance(6000)  # the second arrival extended the initial delay once
    leader = shell.answered(rid_a).leader_id
    shell.sync(leader, 1, [(m, b"") for m in shell.group.members])
    assert shell.group.state is S.STABLE
    restarted = shell.answered(shell.join(instance="i-1"))  # restarted before syncing
    assert shell.answered(rid_b).member_id not in shell.group.pending_sync
    assert shell.group.pending_sync == {restarted.member_id}
    assert shell.answered(shell.sync(restarted.member_id, 1, instance="i-1")).error == E.none
    for _ in range(REBALANCE_MS // 5000):
        shell.advance(5000)
        for member_id, instance in ((leader, "i-0"), (restarted.member_id, "i-1")):
            shell.heartbeat(member_id, 1, instance=instance)
    assert shell.group.state is S.STABLE  # nobody owed a sync when the deadline came


def test_a_static_member_that_does_not_rejoin_keeps_its_place_through_a_rebalance():
    shell = Shell()
    leader, follower = shell.stable_group(2, static=True)
    rid = shell.join(leader, instance=shell.group.members[leader].group_instance_id)
    for _ in range(REBALANCE_MS // 5000):
        shell.advance(5000)
        shell.heartbeat(follower, 1, instance=shell.group.members[follower].group_instance_id)
    assert follower in shell.group.members  # not removed by the rebalance timeout, only by its session
    assert shell.answered(rid).generation_id == 2


def test_a_static_member_rejoining_while_its_old_id_waits_fences_the_old_request():
    shell = Shell()
    first = shell.join(instance="i-0")
    old_id = shell.group.static_members["i-0"]
    second = shell.join(instance="i-0")
    assert shell.answered(first) == JoinResult(first, E.fenced_instance_id, old_id)
    shell.advance(3000)
    assert shell.answered(second).error == E.none
    assert shell.answered(second).member_id != old_id


def test_an_admin_removes_a_static_member_by_instance_id():
    shell = Shell()
    _, follower = shell.stable_group(2, static=True)
    instance = shell.group.members[follower].group_instance_id
    rid = shell.leave(LeavingMember("", instance), LeavingMember("", "nobody"))
    assert shell.answered(rid).members == (
        (LeavingMember("", instance), E.none),
        (LeavingMember("", "nobody"), E.unknown_member_id),
    )
    assert follower not in shell.group.members
    assert shell.group.state is S.PREPARING_REBALANCE


# ------------------------------------------------------------------------------- failover


def test_an_unloaded_partition_answers_parked_requests_with_not_coordinator():
    shell = Shell()
    _, rid = shell.join_new()
    partition = shell.coordinator.partition_for("g")
    shell.apply(shell.coordinator.unload(partition))
    assert shell.answered(rid).error == E.not_coordinator
    assert shell.answered(shell.heartbeat("x", 1)).error == E.not_coordinator
    shell.advance(REBALANCE_MS)  # the group's timers fire into nothing


def test_the_last_member_leaving_empties_the_group_and_records_it():
    shell = Shell()
    (only,) = shell.stable_group(1)
    shell.leave(LeavingMember(only))
    # PreparingRebalance with nobody left to wait for: the next generation is Empty.
    assert shell.group.state is S.EMPTY
    assert shell.group.generation_id == 2
    assert len(shell.log) == 2


# ------------------------------------------------------------------------------- stale timers


def test_a_superseded_session_timer_that_still_fires_does_nothing():
    shell = Shell()
    leader, follower = shell.stable_group(2)
    old = shell.timers[(TimerKind.HEARTBEAT, "g", follower)]
    shell.advance(SESSION_MS // 2)
    shell.heartbeat(follower, 1)
    shell.now = old.deadline_ms
    shell.apply(shell.coordinator.on_timer(old, shell.now))  # a timer the shell failed to replace
    assert follower in shell.group.members and shell.group.state is S.STABLE


def test_a_join_timer_firing_after_everyone_rejoined_does_nothing():
    shell = Shell()
    leader, follower = shell.stable_group(2)
    shell.join(leader)
    timer = shell.timers[(TimerKind.JOIN, "g", "")]
    shell.join(follower)  # the join completes at once
    assert shell.group.state is S.COMPLETING_REBALANCE
    shell.apply(shell.coordinator.on_timer(timer, timer.deadline_ms))
    assert (shell.group.state, shell.group.generation_id) == (S.COMPLETING_REBALANCE, 2)


def test_a_timer_for_a_group_that_is_gone_does_nothing():
    shell = Shell()
    out = shell.coordinator.on_timer(Timer(TimerKind.HEARTBEAT, "nope", "m", 5), 5)
    assert (out.replies, out.timers, out.writes) == ([], [], [])
