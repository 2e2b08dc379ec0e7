"""The controller's partition reassignment operations (KIP-455): AlterPartitionReassignments starts or cancels
reassignments, ListPartitionReassignments shows those in progress, and `send_moves` carries a reassignment
step to the brokers, whether an admin request or an ISR change (an AlterPartition completing it) made it.

The rules are pure, in reassignment.py; here they are committed (records in the metadata log, so a restarted
or new active controller carries on) and told: LeaderAndIsr to the replicas of the new registration (new
replicas start fetching; a removed leader hands over), StopReplica with delete to the replicas that left.
"""

import logging
from collections import Counter
from collections.abc import Coroutine, Iterable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from replog.log.partition_log import TopicPartition

from . import reassignment, records
from .admin import AdminTarget, Outcome
from .cluster import ClusterMetadata
from .propagation import Delivery, PropagationError, Propagator
from .registry import PartitionRegistration
from .state_machines import ClusterStates

log = logging.getLogger(__name__)

# (topic, partition, target replicas, or None to cancel)
Requested = tuple[str, int, Sequence[int] | None]
Move = tuple[PartitionRegistration, PartitionRegistration]  # (before, after)


def decide_reassignments(metadata: ClusterMetadata, requested: Sequence[Requested],
                         allow_replication_factor_change: bool = True) -> tuple[list[Outcome], list[Move]]:
    """Per requested partition, its outcome, and the changes of the accepted ones (Kafka's
    ReplicationControlManager.alterPartitionReassignments: each partition is judged on its own)."""
    mentions = Counter((topic, partition) for topic, partition, _ in requested)
    live = metadata.active_broker_ids()
    outcomes, moves = [], []
    for topic, partition, target in requested:
        current = _registration(metadata, topic, partition)
        if current is None:
            outcomes.append(Outcome(ErrorCode.unknown_topic_or_partition, "Unable to find partition: "
                                                                          f"{topic}:{partition}"))
            continue
        if mentions[(topic, partition)] > 1:
            outcomes.append(Outcome(ErrorCode.invalid_request, f"partition {topic}-{partition} named twice"))
            continue
        try:
            if target is None:
                step = reassignment.cancel(current, live)
            else:
                step = reassignment.start(current, target, is_registered=metadata.brokers.__contains__, live=live,
                                          allow_replication_factor_change=allow_replication_factor_change)
        except reassignment.ReassignmentRefused as e:
            outcomes.append(Outcome(e.error_code, str(e)))
            continue
        outcomes.append(Outcome())
        if step.registration is not current:
            moves.append((current, step.registration))
    return outcomes, moves


async def alter_partition_reassignments(target: AdminTarget, requested: Sequence[Requested],
                                        allow_replication_factor_change: bool = True) -> list[Outcome]:
    """Commit the accepted reassignment steps and tell the brokers; answers once the replicas have them, as
    Kafka answers once the records are committed (the move itself goes on in the background)."""
    outcomes, moves = decide_reassignments(target.metadata, requested, allow_replication_factor_change)
    if not moves:
        return outcomes
    target.commit_records([records.partition_record(after) for _, after in moves])
    for before, after in moves:
        log.info("reassigning %s-%d: replicas %s -> %s (adding %s, removing %s)", after.topic, after.partition,
                 list(before.replicas), list(after.replicas), list(after.adding_replicas),
                 list(after.removing_replicas))
    failure = await send_moves(target.metadata, target.states, target.propagator, moves)
    try:
        await target.propagator.wait(target.propagator.update_metadata())
    except PropagationError as e:
        failure = failure or e
    if failure is not None:
        log.warning("reassignment committed, not yet applied everywhere: %s", failure)
    return outcomes


def send_moves(metadata: ClusterMetadata, states: ClusterStates, propagator: Propagator,
               moves: Iterable[Move]) -> Coroutine[Any, Any, PropagationError | None]:
    """Queue now, in order, the requests of committed reassignment steps; the returned coroutine waits for
    the answers and records which removed replicas were deleted."""
    live = metadata.live_broker_ids()
    deliveries: list[Delivery] = []
    removals: list[tuple[TopicPartition, list[Delivery]]] = []
    moves = list(moves)
    states.partitions_changed(after for _, after in moves)
    for before, after in moves:
        added = [b for b in after.replicas if b not in before.replicas]
        removed = [b for b in before.replicas if b not in after.replicas]
        states.replicas_added(after, added, live)
        deliveries += propagator.leader_and_isr([after], is_new=bool(added), broker_ids=after.replicas)
        if removed:
            states.replicas_removal_started(after, removed)
            stops = propagator.stop_removed_replicas(after, removed, delete=True)
            removals.append((TopicPartition(after.topic, after.partition), stops))
            # A broker the controller does not talk to (fenced) cannot be told; its deletion failed for now.
            told = {d.broker_id for d in stops}
            states.replicas_removal_finished(removals[-1][0], (), [b for b in removed if b not in told])
        if not after.is_reassigning and before.is_reassigning:
            log.info("reassignment of %s-%d done: replicas %s, leader %d", after.topic, after.partition,
                     list(after.replicas), after.leader)
    return _finish(states, propagator, deliveries, removals)


async def _finish(states: ClusterStates, propagator: Propagator, deliveries: list[Delivery],
                  removals: list[tuple[TopicPartition, list[Delivery]]]) -> PropagationError | None:
    failures = []
    try:
        await propagator.wait(deliveries)
    except PropagationError as e:
        failures += e.failures
    for key, stops in removals:
        try:
            await propagator.wait(stops)
            failed: set[int] = set()
        except PropagationError as e:
            failures += e.failures
            failed = {f.broker_id for f in e.failures}
        states.replicas_removal_finished(key, [d.broker_id for d in stops if d.broker_id not in failed], failed)
    return PropagationError(failures) if failures else None


def list_partition_reassignments(metadata: ClusterMetadata, requested: Sequence[tuple[str, Sequence[int]]] | None
                                 ) -> list[PartitionRegistration]:
    """The partitions with a reassignment in progress: all of them, or those of `requested` (unknown topics
    and partitions, and those not moving, are left out, as Kafka does)."""
    if requested is None:
        return [p for t in metadata.topics.values() for p in t.partitions.values() if p.is_reassigning]
    found = []
    for topic, partitions in requested:
        for index in partitions:
            p = _registration(metadata, topic, index)
            if p is not None and p.is_reassigning:
                found.append(p)
    return found


def _registration(metadata: ClusterMetadata, topic: str, partition: int) -> PartitionRegistration | None:
    registration = metadata.topics.get(topic)
    return None if registration is None else registration.partitions.get(partition)
