"""Random schedules of joins, syncs, heartbeats, commits, leaves, crashes, failovers, held writes and time,
from a seed: the group's invariants hold after every step, no request is answered twice, and once every
client falls silent each request has been answered and the group ends Empty.

A failing seed is a reproducible bug report: pytest -k "seed_N".
"""

import random

import pytest
from kio.schema.errors import ErrorCode

from replog.coordinator.group import ClassicGroup, GroupState
from replog.coordinator.outcomes import JoinResult, LeavingMember

from .group_shell import REBALANCE_MS, SESSION_MS, Shell, config

S = GroupState
CLIENTS = 6
STEPS = 250


def check_invariants(group: ClassicGroup) -> None:
    members = group.members
    if members:
        assert group.leader_id in members, (group.leader_id, list(members))
    else:
        assert group.leader_id is None
    assert {i: m for i, m in group.static_members.items()} == {
        m.group_instance_id: m.member_id for m in members.values() if m.group_instance_id is not None
    }
    assert not set(group.pending_members) & set(members)
    assert group.pending_sync <= set(members)
    if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
        assert members and group.protocol_name is not None
        assert group.join_timer is None
    if group.is_(S.EMPTY):
        assert not members
    if group.is_(S.PREPARING_REBALANCE):
        assert group.join_timer is not None
    for member in members.values():
        if member.awaiting_join:
            # Parked joins wait for a rebalance, or for the write of a static member's new id.
            assert group.is_(S.PREPARING_REBALANCE) or group.is_(S.STABLE), group.state
        if member.awaiting_sync:
            assert group.is_(S.COMPLETING_REBALANCE)


class Client:
    """What a client knows: its member id and generation, learned only from answers."""

    def __init__(self, index: int, static: bool) -> None:
        self.instance = f"i-{index}" if static else None
        self.member_id = ""
        self.generation = -1
        self.last_request: int | None = None


def step(shell: Shell, rng: random.Random, clients: list[Client]) -> None:
    client = rng.choice(clients)
    if client.last_request is not None and client.last_request in shell.replies:
        reply = shell.replies[client.last_request]
        if isinstance(reply, JoinResult):
            if reply.error in (ErrorCode.none, ErrorCode.member_id_required):
                client.member_id = reply.member_id
                client.generation = reply.generation_id
            elif reply.error in (ErrorCode.unknown_member_id, ErrorCode.fenced_instance_id):
                client.member_id, client.generation = "", -1
    action = rng.random()
    if action < 0.3:
        client.last_request = shell.join(
            client.member_id, instance=client.instance, skip_assignment=rng.random() < 0.5
        )
    elif action < 0.5:
        gen = client.generation
        assignments = (
            [(m, b"x") for m in shell.coordinator.groups["g"].members]
            if "g" in shell.coordinator.groups
            else []
        )
        client.last_request = shell.sync(client.member_id, gen, assignments, instance=client.instance)
    elif action < 0.7:
        client.last_request = shell.heartbeat(client.member_id, client.generation, instance=client.instance)
    elif action < 0.75:
        client.last_request = shell.commit(
            client.member_id, client.generation, {("t", 0): rng.randrange(100)}, instance=client.instance
        )
    elif action < 0.8:
        client.last_request = shell.leave(LeavingMember(client.member_id, client.instance))
        client.member_id, client.generation = "", -1
    elif action < 0.82:
        client.member_id, client.generation = "", -1  # a crash: a static client rejoins by instance id
    elif action < 0.84:
        failover(shell)
    elif action < 0.88:
        shell.hold_writes = not shell.hold_writes
        if not shell.hold_writes:
            shell.release(rng.choice([ErrorCode.none, ErrorCode.none, ErrorCode.request_timed_out]))
    else:
        shell.advance(rng.choice([1, 100, 1000, 3000, SESSION_MS // 2, SESSION_MS]))


def failover(shell: Shell) -> None:
    """The coordinator loses the partition and gets it back, reloading what its log holds; writes still in
    flight were appended, and complete later."""
    partition = shell.coordinator.partition_for("g")
    shell.apply(shell.coordinator.unload(partition))
    shell.coordinator.begin_loading(partition)
    shell.apply(shell.coordinator.finish_loading(partition, shell.log, shell.now))


@pytest.mark.parametrize("seed", range(100), ids=lambda s: f"seed_{s}")
def test_random_schedules_keep_the_group_consistent_and_answer_every_request(seed):
    rng = random.Random(seed)
    shell = Shell(config(group_max_size=rng.choice([2, 4, 100])))
    clients = [Client(i, static=rng.random() < 0.4) for i in range(CLIENTS)]
    for _ in range(STEPS):
        step(shell, rng, clients)
        if "g" in shell.coordinator.groups:
            check_invariants(shell.coordinator.groups["g"])
    # Everyone falls silent: writes complete, sessions and rebalances run out.
    shell.hold_writes = False
    shell.release()
    shell.advance(REBALANCE_MS * 4 + 300_000 * 2)
    group = shell.coordinator.groups.get("g")
    if group is not None:
        check_invariants(group)
        assert group.is_(S.EMPTY) and not group.pending_members
    unanswered = [rid for rid in shell.requests if rid not in shell.replies]
    assert unanswered == []
