"""The partition and replica state machines: every legal and every illegal transition, and batches that move
all their keys or none."""

import itertools
from collections import deque

import pytest

from replog.controller.state_machines import (
    VALID_PREVIOUS_PARTITION_STATES,
    VALID_PREVIOUS_REPLICA_STATES,
    IllegalStateTransition,
    PartitionReplica,
    PartitionState,
    PartitionStateMachine,
    ReplicaState,
    ReplicaStateMachine,
)
from replog.log.partition_log import TopicPartition

P, R = PartitionState, ReplicaState

# The legal moves written out one by one, independently of the module's tables: seed 000 sections 1.1 and
# 1.3, plus Offline -> Offline and the deletion states of Kafka 2.x+ (see the module docstring).
LEGAL_PARTITION_MOVES = {
    (P.NON_EXISTENT, P.NEW),
    (P.NEW, P.ONLINE),
    (P.ONLINE, P.ONLINE),
    (P.OFFLINE, P.ONLINE),
    (P.NEW, P.OFFLINE),
    (P.ONLINE, P.OFFLINE),
    (P.OFFLINE, P.OFFLINE),
    (P.OFFLINE, P.NON_EXISTENT),
}
LEGAL_REPLICA_MOVES = {
    (R.NON_EXISTENT, R.NEW),
    (R.NEW, R.ONLINE),
    (R.ONLINE, R.ONLINE),
    (R.OFFLINE, R.ONLINE),
    (R.DELETION_INELIGIBLE, R.ONLINE),
    (R.NEW, R.OFFLINE),
    (R.ONLINE, R.OFFLINE),
    (R.OFFLINE, R.OFFLINE),
    (R.DELETION_INELIGIBLE, R.OFFLINE),
    (R.OFFLINE, R.DELETION_STARTED),
    (R.DELETION_STARTED, R.DELETION_SUCCESSFUL),
    (R.OFFLINE, R.DELETION_INELIGIBLE),
    (R.DELETION_STARTED, R.DELETION_INELIGIBLE),
    (R.DELETION_SUCCESSFUL, R.NON_EXISTENT),
}

TP = TopicPartition("t", 0)
MACHINES = {
    "partition": (PartitionStateMachine, PartitionState, LEGAL_PARTITION_MOVES, TP),
    "replica": (ReplicaStateMachine, ReplicaState, LEGAL_REPLICA_MOVES, PartitionReplica(TP, 1)),
}


def table_as_moves(valid_previous) -> set:
    return {(before, target) for target, befores in valid_previous.items() for before in befores}


def test_the_tables_are_the_documented_moves():
    assert table_as_moves(VALID_PREVIOUS_PARTITION_STATES) == LEGAL_PARTITION_MOVES
    assert table_as_moves(VALID_PREVIOUS_REPLICA_STATES) == LEGAL_REPLICA_MOVES


def path_to(state, start, legal_moves) -> list:
    """The shortest sequence of legal targets that takes a key from `start` to `state`."""
    paths = {start: []}
    queue = deque([start])
    while queue:
        current = queue.popleft()
        for before, after in sorted(legal_moves, key=lambda move: (move[0].value, move[1].value)):
            if before is current and after not in paths:
                paths[after] = paths[current] + [after]
                queue.append(after)
    return paths[state]


def machine_with_key_in(kind: str, state):
    cls, _, legal_moves, key = MACHINES[kind]
    machine = cls()
    for step in path_to(state, machine.state(key), legal_moves):
        machine.transition([key], step)
    assert machine.state(key) is state
    return machine, key


def cross_product(kind: str) -> list:
    _, states, _, _ = MACHINES[kind]
    return [(kind, before, target) for before, target in itertools.product(states, repeat=2)]


CASES = cross_product("partition") + cross_product("replica")


@pytest.mark.parametrize(("kind", "before", "target"), CASES,
                         ids=[f"{k}:{b.value}->{t.value}" for k, b, t in CASES])
def test_every_transition(kind, before, target):
    machine, key = machine_with_key_in(kind, before)
    legal = (before, target) in MACHINES[kind][2]
    assert machine.is_valid_transition(before, target) is legal
    if legal:
        assert machine.transition([key], target) == {key: before}
        assert machine.state(key) is target
    else:
        with pytest.raises(IllegalStateTransition) as raised:
            machine.transition([key], target)
        assert (raised.value.key, raised.value.current, raised.value.target) == (key, before, target)
        assert str(key) in str(raised.value)
        assert f"{before.value} -> {target.value}" in str(raised.value)
        assert machine.state(key) is before


def test_a_new_key_is_non_existent_and_untracked():
    partitions, replicas = PartitionStateMachine(), ReplicaStateMachine()
    assert partitions.state(TP) is P.NON_EXISTENT and len(partitions) == 0
    assert replicas.state(PartitionReplica(TP, 3)) is R.NON_EXISTENT and len(replicas) == 0


def test_a_deleted_key_is_forgotten():
    machine, key = machine_with_key_in("partition", P.OFFLINE)
    assert len(machine) == 1
    machine.transition([key], P.NON_EXISTENT)
    assert len(machine) == 0 and machine.state(key) is P.NON_EXISTENT
    machine.transition([key], P.NEW)  # a topic deleted and created again
    assert machine.state(key) is P.NEW


def test_an_illegal_key_fails_the_whole_batch():
    machine = PartitionStateMachine()
    a, b, c = (TopicPartition("t", i) for i in range(3))
    machine.transition([a, b, c], P.NEW)
    machine.transition([b], P.ONLINE)
    with pytest.raises(IllegalStateTransition) as raised:
        machine.transition([a, b, c], P.NEW)  # New -> New and Online -> New are both illegal
    assert raised.value.key == a  # the first offender is named
    with pytest.raises(IllegalStateTransition) as raised:
        machine.transition([a, c, b], P.NON_EXISTENT)
    assert raised.value.key == a
    with pytest.raises(IllegalStateTransition) as raised:
        machine.transition([a, c, TopicPartition("t", 9)], P.OFFLINE)  # t-9 was never created
    assert raised.value.key == TopicPartition("t", 9)
    assert [machine.state(k) for k in (a, b, c)] == [P.NEW, P.ONLINE, P.NEW]  # nothing moved
    assert len(machine) == 3  # and nothing was added


def test_a_legal_batch_moves_every_key_and_reports_where_each_came_from():
    machine = ReplicaStateMachine()
    r1, r2, r3 = (PartitionReplica(TP, broker) for broker in (1, 2, 3))
    machine.transition([r1, r2, r3], R.NEW)
    machine.transition([r1], R.ONLINE)
    machine.transition([r2], R.OFFLINE)
    assert machine.transition([r3, r1, r2], R.OFFLINE) == {r3: R.NEW, r1: R.ONLINE, r2: R.OFFLINE}
    assert list(machine.transition([r3, r1, r2], R.OFFLINE)) == [r3, r1, r2]  # the caller's order
    assert machine.keys_in(R.OFFLINE) == [r1, r2, r3]


def test_a_key_given_twice_moves_once():
    machine = PartitionStateMachine()
    assert machine.transition([TP, TP], P.NEW) == {TP: P.NON_EXISTENT}  # New -> New would be illegal
    assert machine.state(TP) is P.NEW


def test_an_empty_batch_changes_nothing():
    machine = PartitionStateMachine()
    assert machine.transition([], P.ONLINE) == {}
    assert len(machine) == 0


def test_keys_in_a_state():
    machine = PartitionStateMachine()
    a, b, c = (TopicPartition("t", i) for i in range(3))
    machine.transition([a, b, c], P.NEW)
    machine.transition([b, c], P.ONLINE)
    machine.transition([c], P.OFFLINE)
    assert (machine.keys_in(P.NEW), machine.keys_in(P.ONLINE), machine.keys_in(P.OFFLINE)) == ([a], [b], [c])


def test_topic_deletion_walks_the_replica_deletion_states():
    # Seed 000, topic deletion 2.2-2.4: replicas go offline, deletion starts, the broker deletes the log.
    machine = ReplicaStateMachine()
    replicas = [PartitionReplica(TP, broker) for broker in (1, 2)]
    for target in (R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_STARTED):
        machine.transition(replicas, target)
    machine.transition(replicas[:1], R.DELETION_SUCCESSFUL)
    machine.transition(replicas[1:], R.DELETION_INELIGIBLE)  # broker 2 failed the StopReplica
    machine.transition(replicas[:1], R.NON_EXISTENT)
    machine.transition(replicas[1:], R.OFFLINE)  # retried later
    assert [machine.state(r) for r in replicas] == [R.NON_EXISTENT, R.OFFLINE]
    assert len(machine) == 1
