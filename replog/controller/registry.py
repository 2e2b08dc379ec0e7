"""A partition as the controller records it, and the pure rules that change it.

Kafka's metadata module keeps the same shape: `PartitionRegistration` (replicas, ISR, leader, leader epoch,
partition epoch) is an immutable value, and every change produces a new one. The AlterPartition rules follow
`ReplicationControlManager.validateAlterPartitionData` (KRaft, Kafka 3.x/4.x) check for check and in the
same order, since the order decides which error a request with several faults gets.

Two epochs, two jobs:
- the leader epoch changes with leadership; it fences old leaders and old followers' fetches;
- the partition epoch changes with every change (leader, ISR, replicas); an AlterPartition must name the
  current one, so a leader cannot overwrite a change it has not seen (compare-and-set, KIP-497).
"""

import dataclasses
import enum
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

MAX_REPLICATION_FACTOR = 64  # far above any real cluster; bounds every replica list the controller keeps
# No replica may lead (Kafka's LeaderConstants.NO_LEADER): the partition is offline until one comes back.
NO_LEADER = -1


class LeaderRecoveryState(enum.IntEnum):
    """KIP-704: RECOVERING after an unclean election until the leader has recovered its log."""

    RECOVERED = 0
    RECOVERING = 1


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    topic: str
    topic_id: uuid.UUID
    partition: int
    replicas: tuple[int, ...]  # the assignment; the first replica is the preferred leader
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    # KIP-455, while a reassignment moves the partition: replicas = target + removing (the target's order
    # first), adding = target replicas not in the original set, removing = original replicas not in the target.
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        assert self.partition >= 0, self
        assert 0 < len(self.replicas) <= MAX_REPLICATION_FACTOR, self
        assert is_valid_replica_list(self.replicas), self
        assert is_valid_isr(self.replicas, self.isr), self
        # DESIGN.md: the ISR always contains the leader. Without a leader the ISR keeps its last member, so
        # the controller knows which replica has every committed record (KRaft's PartitionChangeBuilder).
        assert self.isr, self
        assert self.leader == NO_LEADER or self.leader in self.isr, self
        assert self.leader_epoch >= 0, self
        assert self.partition_epoch >= self.leader_epoch, self  # every leader change is a partition change
        assert set(self.adding_replicas) <= set(self.replicas), self
        assert set(self.removing_replicas) <= set(self.replicas), self
        assert not set(self.adding_replicas) & set(self.removing_replicas), self

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0]

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    @property
    def is_reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)


def new_partition(topic: str, topic_id: uuid.UUID, partition: int, replicas: Sequence[int]) -> PartitionRegistration:
    """A new partition: every replica in sync, the first (preferred) one leads, both epochs 0."""
    return PartitionRegistration(topic, topic_id, partition, tuple(replicas), tuple(replicas), replicas[0], 0, 0)


def is_valid_replica_list(replicas: Sequence[int]) -> bool:
    """Kafka's Replicas.validate: no negative broker ids and no duplicates."""
    return all(r >= 0 for r in replicas) and len(set(replicas)) == len(replicas)


def is_valid_isr(replicas: Sequence[int], isr: Sequence[int]) -> bool:
    """Kafka's Replicas.validateIsr: no negative ids, no duplicates, every member a replica.

    An empty ISR passes here as it does in Kafka; the "ISR contains the leader" rule rejects it.
    """
    return is_valid_replica_list(isr) and set(isr) <= set(replicas)


def validate_alter_partition(
    registration: PartitionRegistration,
    *,
    broker_id: int,
    leader_epoch: int,
    new_isr: Sequence[int],
    partition_epoch: int,
    is_eligible: Callable[[int], bool],
    leader_recovery_state: int = LeaderRecoveryState.RECOVERED,
) -> ErrorCode:
    """The error for one partition of an AlterPartition request (v2+), or ErrorCode.none if it may apply.

    is_eligible(broker_id) says whether a replica may join the ISR (KIP-841): registered, not fenced, not
    in controlled shutdown, and, for v3 requests, the broker epoch the leader saw is the registered one.
    """
    current = registration
    # A higher epoch than ours means the sender has seen a newer controller's decision: we are probably no
    # longer the active controller, and NOT_CONTROLLER sends the leader looking for the new one.
    if leader_epoch > current.leader_epoch or partition_epoch > current.partition_epoch:
        return ErrorCode.not_controller
    if leader_epoch < current.leader_epoch:
        return ErrorCode.fenced_leader_epoch
    if broker_id != current.leader:
        return ErrorCode.invalid_request
    # A retry of a change we already made (its answer was lost) finds the ISR it asks for: answer with the
    # current state, which is a no-op, rather than INVALID_UPDATE_VERSION, which would leave the change
    # pending on the leader (no more ISR changes) until a LeaderAndIsr comes, found by tests/sim (seed 19).
    # Kafka's controller makes the same check before the partition-epoch fencing, for idempotency
    # (LeaderAndIsr.equalsAllowStalePartitionEpoch).
    if (partition_epoch < current.partition_epoch and tuple(new_isr) == current.isr
            and leader_recovery_state == current.leader_recovery_state):
        return ErrorCode.none
    # Only the equal partition epoch remains: the leader has seen every change, so its ISR may replace ours.
    if partition_epoch < current.partition_epoch:
        return ErrorCode.invalid_update_version
    if not is_valid_isr(current.replicas, new_isr) or current.leader not in new_isr:
        return ErrorCode.invalid_request
    if leader_recovery_state == LeaderRecoveryState.RECOVERING and len(new_isr) > 1:
        return ErrorCode.invalid_request  # a recovering leader must grow the ISR only once recovered
    if (current.leader_recovery_state == LeaderRecoveryState.RECOVERED
            and leader_recovery_state == LeaderRecoveryState.RECOVERING):
        return ErrorCode.invalid_request  # recovery never goes backwards
    if not all(is_eligible(replica) for replica in new_isr):
        return ErrorCode.ineligible_replica  # request v2+; v0-1 answered OPERATION_NOT_ATTEMPTED
    return ErrorCode.none


def apply_isr_change(registration: PartitionRegistration, new_isr: Sequence[int], *,
                     leader_recovery_state: int = LeaderRecoveryState.RECOVERED) -> PartitionRegistration:
    """The registration after a validated ISR change: partition epoch + 1, leader epoch unchanged.

    Kafka bumped the leader epoch on an ISR shrink only before metadata version 3.6 (KAFKA-15021); since
    then ISR changes leave it alone, so followers' fetches stay valid. A request that changes nothing makes
    no record in Kafka (PartitionChangeBuilder.build returns empty) and so no epoch bump: same here.
    """
    new_isr = tuple(new_isr)
    assert registration.leader == NO_LEADER or registration.leader in new_isr
    recovery = LeaderRecoveryState(leader_recovery_state)
    if new_isr == registration.isr and recovery == registration.leader_recovery_state:
        return registration
    changed = dataclasses.replace(registration, isr=new_isr, partition_epoch=registration.partition_epoch + 1,
                                  leader_recovery_state=recovery)
    assert changed.leader_epoch == registration.leader_epoch
    return changed


def elect_leader(registration: PartitionRegistration, leader: int, isr: Sequence[int], *,
                 leader_recovery_state: LeaderRecoveryState | None = None) -> PartitionRegistration:
    """The registration after the controller makes `leader` (or NO_LEADER) lead with `isr`: both epochs + 1.

    The caller has checked that the leader is acceptable (a live replica in isr); a new leader epoch fences
    the previous leader and tells every follower to truncate to the new leader's log. Going leaderless
    bumps the leader epoch too, as KRaft does, so the deposed leader's epoch is stale everywhere.
    """
    isr = tuple(isr)
    assert leader == NO_LEADER or leader in isr
    assert is_valid_isr(registration.replicas, isr)
    recovery = registration.leader_recovery_state if leader_recovery_state is None else leader_recovery_state
    changed = dataclasses.replace(registration, isr=isr, leader=leader, leader_epoch=registration.leader_epoch + 1,
                                  partition_epoch=registration.partition_epoch + 1, leader_recovery_state=recovery)
    assert changed.partition_epoch > registration.partition_epoch
    return changed


def change_isr(registration: PartitionRegistration, isr: Sequence[int]) -> PartitionRegistration:
    """A controller-initiated ISR change under the same leader (e.g. removing a fenced broker), which Kafka's
    controller writes as a PartitionChangeRecord with the same rule as an AlterPartition: partition epoch + 1."""
    assert is_valid_isr(registration.replicas, isr)
    return apply_isr_change(registration, isr, leader_recovery_state=registration.leader_recovery_state)
