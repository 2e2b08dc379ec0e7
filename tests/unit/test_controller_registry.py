"""The pure partition rules: AlterPartition validation (Kafka's validateAlterPartitionData, rule by rule and
in its order), ISR changes and elections."""

import dataclasses
import uuid

import pytest
from kio.schema.errors import ErrorCode

from replog.controller.registry import (
    NO_LEADER,
    LeaderRecoveryState,
    PartitionRegistration,
    apply_isr_change,
    change_isr,
    elect_leader,
    is_valid_isr,
    new_partition,
    validate_alter_partition,
)

TOPIC_ID = uuid.UUID(int=7)
RECOVERED, RECOVERING = LeaderRecoveryState.RECOVERED, LeaderRecoveryState.RECOVERING

# Replicas 1, 2, 3; broker 1 leads in leader epoch 5, partition epoch 7; broker 3 is out of the ISR.
CURRENT = PartitionRegistration("t", TOPIC_ID, 0, (1, 2, 3), (1, 2), 1, 5, 7)
ELIGIBLE = {1, 2, 3}

# (case, changes to the request {broker_id: 1, leader_epoch: 5, new_isr: [1, 2, 3], partition_epoch: 7},
#  eligible brokers, expected error). The request without changes is a valid ISR expansion.
CASES = [
    ("valid expansion", {}, ELIGIBLE, ErrorCode.none),
    ("valid shrink", {"new_isr": [1]}, ELIGIBLE, ErrorCode.none),
    ("same ISR is valid", {"new_isr": [1, 2]}, ELIGIBLE, ErrorCode.none),
    ("ISR in another order is valid", {"new_isr": [3, 2, 1]}, ELIGIBLE, ErrorCode.none),
    # A higher epoch than the controller's: it is probably no longer the active controller.
    ("leader epoch higher", {"leader_epoch": 6}, ELIGIBLE, ErrorCode.not_controller),
    ("partition epoch higher", {"partition_epoch": 8}, ELIGIBLE, ErrorCode.not_controller),
    ("higher leader epoch beats lower partition epoch", {"leader_epoch": 6, "partition_epoch": 2}, ELIGIBLE,
     ErrorCode.not_controller),
    ("leader epoch lower", {"leader_epoch": 4}, ELIGIBLE, ErrorCode.fenced_leader_epoch),
    ("lower leader epoch is checked before the sender", {"leader_epoch": 4, "broker_id": 2}, ELIGIBLE,
     ErrorCode.fenced_leader_epoch),
    ("sender is not the leader", {"broker_id": 2}, ELIGIBLE, ErrorCode.invalid_request),
    ("sender is checked before the partition epoch", {"broker_id": 2, "partition_epoch": 6}, ELIGIBLE,
     ErrorCode.invalid_request),
    ("partition epoch lower", {"partition_epoch": 6}, ELIGIBLE, ErrorCode.invalid_update_version),
    ("partition epoch is checked before the ISR", {"partition_epoch": 6, "new_isr": []}, ELIGIBLE,
     ErrorCode.invalid_update_version),
    ("empty ISR", {"new_isr": []}, ELIGIBLE, ErrorCode.invalid_request),
    ("duplicate ISR member", {"new_isr": [1, 2, 2]}, ELIGIBLE, ErrorCode.invalid_request),
    ("ISR member not a replica", {"new_isr": [1, 4]}, ELIGIBLE, ErrorCode.invalid_request),
    ("negative ISR member", {"new_isr": [1, -1]}, ELIGIBLE, ErrorCode.invalid_request),
    ("ISR without the leader", {"new_isr": [2, 3]}, ELIGIBLE, ErrorCode.invalid_request),
    ("recovering leader with more than itself", {"leader_recovery_state": RECOVERING, "new_isr": [1, 2]},
     ELIGIBLE, ErrorCode.invalid_request),
    ("recovered leader cannot go back to recovering", {"leader_recovery_state": RECOVERING, "new_isr": [1]},
     ELIGIBLE, ErrorCode.invalid_request),
    ("ineligible new member", {}, {1, 2}, ErrorCode.ineligible_replica),
    ("ineligible old member", {"new_isr": [1, 2]}, {1, 3}, ErrorCode.ineligible_replica),
    ("ineligible leader", {"new_isr": [1]}, {2, 3}, ErrorCode.ineligible_replica),
    ("an invalid ISR is reported before an ineligible member", {"new_isr": [1, 4]}, {1}, ErrorCode.invalid_request),
]


def request(**changes) -> dict:
    base = {"broker_id": 1, "leader_epoch": 5, "new_isr": [1, 2, 3], "partition_epoch": 7}
    return base | changes


@pytest.mark.parametrize(("changes", "eligible", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_validate_alter_partition(changes, eligible, expected):
    asked = []

    def is_eligible(broker_id: int) -> bool:
        asked.append(broker_id)
        return broker_id in eligible

    assert validate_alter_partition(CURRENT, **request(**changes), is_eligible=is_eligible) == expected
    if expected not in (ErrorCode.none, ErrorCode.ineligible_replica):
        assert asked == []  # eligibility is the last rule: a malformed request never gets that far


def test_a_recovering_leader_may_alter_its_isr_alone_and_finish_recovery():
    recovering = dataclasses.replace(CURRENT, isr=(1,), leader_recovery_state=RECOVERING)
    alone = validate_alter_partition(recovering, **request(new_isr=[1], leader_recovery_state=RECOVERING),
                                     is_eligible=ELIGIBLE.__contains__)
    recovered = validate_alter_partition(recovering, **request(new_isr=[1, 2], leader_recovery_state=RECOVERED),
                                         is_eligible=ELIGIBLE.__contains__)
    assert alone == recovered == ErrorCode.none
    changed = apply_isr_change(recovering, [1, 2], leader_recovery_state=RECOVERED)
    assert changed.leader_recovery_state == RECOVERED and changed.partition_epoch == 8


@pytest.mark.parametrize("new_isr", [[1], [1, 2, 3], [2, 1]])
def test_apply_isr_change_bumps_only_the_partition_epoch(new_isr):
    changed = apply_isr_change(CURRENT, new_isr)
    assert changed.isr == tuple(new_isr)
    assert changed.partition_epoch == CURRENT.partition_epoch + 1
    assert changed.leader_epoch == CURRENT.leader_epoch and changed.leader == CURRENT.leader
    assert changed.replicas == CURRENT.replicas


def test_apply_isr_change_with_the_same_isr_changes_nothing():
    # Kafka's PartitionChangeBuilder makes no record for a no-op, so the epochs stay.
    assert apply_isr_change(CURRENT, [1, 2]) is CURRENT


def test_change_isr_keeps_the_recovery_state():
    recovering = dataclasses.replace(CURRENT, isr=(1,), leader_recovery_state=RECOVERING)
    changed = change_isr(recovering, [1, 3])
    assert changed.leader_recovery_state == RECOVERING and changed.partition_epoch == 8


def test_elect_leader_bumps_both_epochs():
    changed = elect_leader(CURRENT, 2, [2])
    assert (changed.leader, changed.isr) == (2, (2,))
    assert (changed.leader_epoch, changed.partition_epoch) == (6, 8)


def test_new_partition_has_every_replica_in_sync_and_the_first_leading():
    partition = new_partition("t", TOPIC_ID, 3, [4, 5, 6])
    assert (partition.leader, partition.isr, partition.leader_epoch, partition.partition_epoch) == (4, (4, 5, 6), 0, 0)
    assert partition.preferred_leader == 4


@pytest.mark.parametrize(("replicas", "isr", "valid"), [
    ((1, 2, 3), (), True),  # as Kafka's Replicas.validateIsr; "contains the leader" rejects it later
    ((1, 2, 3), (3, 1), True),
    ((1, 2, 3), (1, 1), False),
    ((1, 2, 3), (4,), False),
    ((1, 2, 3), (-1,), False),
    ((), (1,), False),
])
def test_is_valid_isr(replicas, isr, valid):
    assert is_valid_isr(replicas, isr) is valid


@pytest.mark.parametrize("changes", [
    {"isr": (2, 3)},  # leader not in ISR
    {"isr": (1, 4)},  # ISR member not a replica
    {"replicas": (1, 1, 2), "isr": (1,)},  # duplicate replica
    {"replicas": ()},
    {"partition_epoch": 4},  # below the leader epoch: some leader change was not a partition change
    {"leader_epoch": -1},
])
def test_registration_invariants_are_asserted(changes):
    with pytest.raises(AssertionError):
        dataclasses.replace(CURRENT, **changes)


# ------------------------------------------------------------------------------- leaderless partitions


def test_a_leaderless_partition_keeps_a_non_empty_isr():
    leaderless = dataclasses.replace(CURRENT, leader=NO_LEADER)  # the ISR (1, 2) stays
    assert not leaderless.has_leader and leaderless.isr == (1, 2)
    with pytest.raises(AssertionError):
        dataclasses.replace(CURRENT, leader=NO_LEADER, isr=())


def test_going_leaderless_and_back_bumps_both_epochs():
    leaderless = elect_leader(CURRENT, NO_LEADER, [1])
    assert (leaderless.leader, leaderless.isr, leaderless.leader_epoch, leaderless.partition_epoch) == \
        (NO_LEADER, (1,), 6, 8)
    back = elect_leader(leaderless, 1, [1])
    assert (back.leader, back.leader_epoch, back.partition_epoch) == (1, 7, 9)


def test_no_alter_partition_is_accepted_for_a_leaderless_partition():
    leaderless = dataclasses.replace(CURRENT, leader=NO_LEADER)
    error = validate_alter_partition(leaderless, broker_id=1, leader_epoch=5, new_isr=[1, 2], partition_epoch=7,
                                     is_eligible=ELIGIBLE.__contains__)
    assert error == ErrorCode.invalid_request
