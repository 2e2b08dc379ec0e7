"""Partition reassignment (KIP-455) as pure rules: how a partition registration changes when a reassignment
starts, completes or is cancelled.

Kafka's KRaft controller keeps the reassignment in the partition record (ReplicationControlManager with
PartitionReassignmentReplicas, PartitionReassignmentRevert and PartitionChangeBuilder); so does replog:
- start: replicas = target + (original - target), adding = target - original, removing = original - target;
  the ISR is unchanged, the new replicas are told (LeaderAndIsr), fetch and catch up;
- complete, checked on every ISR change (an AlterPartition from the leader): once every adding replica is in
  the ISR, the replicas become the target, the removing replicas leave the ISR, and a leader that is being
  removed hands over to the first target replica that is live and in the ISR (seed 000's reassigned-partition
  leader selector, so the preferred target first);
- cancel (a null target): the adding replicas leave replicas and ISR, the original replicas stay.
Replicas that leave the replica set are returned in `Step.removed`: the caller sends them StopReplica with
delete. Their leaving bumps the leader epoch, as PartitionChangeBuilder does when the replica set shrinks, so a
removed follower's fetches are fenced at once.
"""

import dataclasses
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from .registry import MAX_REPLICATION_FACTOR, NO_LEADER, PartitionRegistration, is_valid_replica_list
from .selectors import Elected, reassigned_leader


class ReassignmentRefused(Exception):
    """A reassignment the controller will not start or cancel, with the Kafka error code to answer."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True, slots=True)
class Step:
    """A reassignment's change to one partition: its new registration (the same object when nothing changed)
    and the replicas that left the replica set, which must stop and delete their logs."""

    registration: PartitionRegistration
    removed: tuple[int, ...] = ()


def original_replicas(p: PartitionRegistration) -> tuple[int, ...]:
    """The replicas before the reassignment in progress (all of them when none is)."""
    return tuple(r for r in p.replicas if r not in p.adding_replicas)


def target_replicas(p: PartitionRegistration) -> tuple[int, ...]:
    """Where the reassignment in progress is taking the partition (its replicas when none is)."""
    return tuple(r for r in p.replicas if r not in p.removing_replicas)


def target_error(target: Sequence[int], is_registered: Callable[[int], bool]) -> str | None:
    """Why `target` cannot be a partition's replica set (INVALID_REPLICA_ASSIGNMENT), or None. Kafka's
    ReplicationControlManager.validateManualPartitionAssignment, with its messages."""
    if not target:
        return "The manual partition assignment includes an empty replica list."
    if len(target) > MAX_REPLICATION_FACTOR:
        return f"The manual partition assignment has {len(target)} replicas, more than {MAX_REPLICATION_FACTOR}."
    if not is_valid_replica_list(target):
        return f"The manual partition assignment {list(target)} contains duplicate or negative replica ids."
    unknown = [r for r in target if not is_registered(r)]
    if unknown:
        return (f"The manual partition assignment includes broker {unknown[0]}, but no such broker is "
                f"registered.")
    return None


def start(p: PartitionRegistration, target: Sequence[int], *, is_registered: Callable[[int], bool],
          live: Collection[int], allow_replication_factor_change: bool = True) -> Step:
    """A new target for `p` (replacing any reassignment in progress, which is reckoned from the original
    replicas, as KIP-455 asks). Completes at once when nothing needs to catch up (only removals, or a new
    order). Raises ReassignmentRefused: INVALID_REPLICA_ASSIGNMENT for a bad target; INVALID_REPLICATION_FACTOR
    for a target whose length differs from the replica set the partition is headed for, when the request
    disallows that (KIP-860)."""
    message = target_error(target, is_registered)
    if message is not None:
        raise ReassignmentRefused(ErrorCode.invalid_replica_assignment, message)
    if not allow_replication_factor_change and len(target) != len(headed_for := target_replicas(p)):
        raise ReassignmentRefused(ErrorCode.invalid_replication_factor,
                                  f"The replication factor would change from {len(headed_for)} to {len(target)}, "
                                  f"and the request does not allow replication factor changes.")
    target = tuple(target)
    original = original_replicas(p)
    removing = tuple(r for r in original if r not in target)
    adding = tuple(r for r in target if r not in original)
    growing = _reshape(p, target + removing, adding, removing, p.isr, live)
    completed = maybe_complete(growing.registration, live)
    if completed is None:
        return growing
    done = completed.registration  # one change from `p`, as Kafka makes one record of it
    return _reshape(p, done.replicas, (), (), done.isr, live, leader=done.leader)


def maybe_complete(p: PartitionRegistration, live: Collection[int]) -> Step | None:
    """The completing change once every adding replica is in the ISR and a target replica can lead; None
    while the reassignment must wait (or when none is in progress)."""
    if not p.is_reassigning or not set(p.adding_replicas) <= set(p.isr):
        return None
    target = target_replicas(p)
    isr = tuple(r for r in p.isr if r in target)
    if not isr:
        return None  # no target replica is in sync yet: removing the others would lose committed records
    leader = p.leader if p.leader in isr else _leader_among(target, isr, live)
    if leader is None:
        return None  # the leader is leaving and no target replica can take over yet: the next change retries
    return _reshape(p, target, (), (), isr, live, leader=leader)


def cancel(p: PartitionRegistration, live: Collection[int]) -> Step:
    """Revert to the original replicas (PartitionReassignmentRevert): the adding replicas leave.

    Kafka makes the original replicas unclean leader candidates when none of them is in sync; replog refuses
    the cancel then (INVALID_REPLICA_ASSIGNMENT), since reverting would drop the only replicas holding every
    committed record: let the reassignment finish, or reassign again."""
    if not p.is_reassigning:
        raise ReassignmentRefused(ErrorCode.no_reassignment_in_progress,
                              f"No ongoing reassignment for partition {p.topic}-{p.partition}.")
    original = original_replicas(p)
    isr = tuple(r for r in p.isr if r in original)
    if not isr:
        raise ReassignmentRefused(ErrorCode.invalid_replica_assignment,
                              f"Cannot cancel the reassignment of {p.topic}-{p.partition}: no original replica "
                              f"{list(original)} is in the ISR {list(p.isr)}.")
    return _reshape(p, original, (), (), isr, live)


def _leader_among(target: Sequence[int], isr: Sequence[int], live: Collection[int]) -> int | None:
    elected = reassigned_leader(target, isr, live)
    return elected.leader if isinstance(elected, Elected) else None


def _reshape(p: PartitionRegistration, replicas: tuple[int, ...], adding: tuple[int, ...],
             removing: tuple[int, ...], isr: Sequence[int], live: Collection[int], *,
             leader: int | None = None) -> Step:
    """`p` with a new replica set: the ISR keeps only replicas, a leader outside them is replaced (or the
    partition goes leaderless), and both epochs move when the leader changes or a replica leaves."""
    isr = tuple(r for r in isr if r in replicas)
    assert isr, (p, replicas)  # each caller keeps an ISR member that holds every committed record
    if leader is None:
        leader = p.leader if p.leader in isr else _leader_among(replicas, isr, live)
        leader = NO_LEADER if leader is None else leader
    removed = tuple(sorted(set(p.replicas) - set(replicas)))
    if (replicas, adding, removing, isr, leader) == (p.replicas, p.adding_replicas, p.removing_replicas, p.isr,
                                                     p.leader):
        return Step(p)
    bump_leader_epoch = leader != p.leader or bool(removed)
    changed = dataclasses.replace(p, replicas=replicas, adding_replicas=adding, removing_replicas=removing,
                                  isr=isr, leader=leader,
                                  leader_epoch=p.leader_epoch + 1 if bump_leader_epoch else p.leader_epoch,
                                  partition_epoch=p.partition_epoch + 1)
    return Step(changed, removed)
