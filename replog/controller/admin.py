"""The controller's admin operations that clients reach through a broker (KIP-590 forwarding): config changes
(AlterConfigs, IncrementalAlterConfigs), CreatePartitions and ElectLeaders.

Each operation is decided first (pure, against the current metadata: the error per resource and the records
that make the change), then committed (records logged and applied, exactly as replay applies them) and
propagated: configs travel to every broker in UpdateMetadata, new partitions and new leaders in LeaderAndIsr to
their replicas.
"""

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from replog.log.dynamic_configs import (
    ConfigResource,
    InvalidConfigError,
    ResourceType,
    altered_entity,
    is_broker_entity_name,
)

from . import records
from .assignment import assign_replicas
from .cluster import MAX_PARTITIONS_PER_TOPIC, ClusterMetadata, ControllerError
from .elections import Answer, ElectionType, decide_elections
from .propagation import PropagationError, Propagator
from .reassignment import target_replicas
from .registry import MAX_REPLICATION_FACTOR, is_valid_replica_list, new_partition
from .state_machines import ClusterStates

log = logging.getLogger(__name__)


class AdminTarget(Protocol):
    """What the admin operations need of the controller (ClusterController implements it)."""

    @property
    def metadata(self) -> ClusterMetadata: ...

    @property
    def propagator(self) -> Propagator: ...

    @property
    def states(self) -> ClusterStates: ...

    @property
    def active(self) -> bool: ...  # a standby of the controller quorum answers NOT_CONTROLLER

    def commit_records(self, new_records: list[records.Record]) -> None: ...


@dataclass(frozen=True, slots=True)
class Outcome:
    error_code: ErrorCode = ErrorCode.none
    message: str | None = None


def decide_config_changes(metadata: ClusterMetadata, resources: Sequence[ConfigResource], *,
                          incremental: bool) -> tuple[list[Outcome], list[records.Record]]:
    """Per resource, its outcome, and the records of the accepted changes (one per changed entity).

    Kafka's ConfigurationControlManager: every resource is judged on its own; one naming a resource twice in
    a request is INVALID_REQUEST for each mention."""
    mentions = Counter((r.resource_type, r.name) for r in resources)  # linear: a request may name many
    outcomes, changes = [], []
    for resource in resources:
        if mentions[(resource.resource_type, resource.name)] > 1:
            outcomes.append(Outcome(ErrorCode.invalid_request, f"resource {resource.name!r} named twice"))
            continue
        try:
            record = _decide_resource(metadata, resource, incremental)
        except ControllerError as e:
            outcomes.append(Outcome(e.error_code, str(e).split(": ", 1)[-1]))
            continue
        outcomes.append(Outcome())
        if record is not None:
            changes.append(record)
    return outcomes, changes


def _decide_resource(metadata: ClusterMetadata, resource: ConfigResource, incremental: bool) -> records.Record | None:
    if resource.resource_type == ResourceType.TOPIC:
        topic = metadata.topics.get(resource.name)
        if topic is None:
            raise ControllerError(ErrorCode.unknown_topic_or_partition, f"Topic {resource.name} does not exist")
        current, kind = topic.configs, "topic"
    elif resource.resource_type == ResourceType.BROKER:
        # A per-broker entry may precede its broker, as in Kafka.
        if not is_broker_entity_name(resource.name):
            raise ControllerError(ErrorCode.invalid_request, f"Invalid broker name {resource.name!r}")
        current, kind = metadata.broker_configs.get(resource.name, {}), "broker"
    else:
        raise ControllerError(ErrorCode.invalid_request, f"Unsupported resource type {resource.resource_type}")
    try:
        new = altered_entity(ResourceType(resource.resource_type), current, resource.changes, incremental=incremental)
    except InvalidConfigError as e:
        raise ControllerError(ErrorCode.invalid_config, str(e)) from e
    return None if new == current else records.config_record(kind, resource.name, new)


async def alter_configs(target: AdminTarget, resources: Sequence[ConfigResource], *, incremental: bool,
                        validate_only: bool) -> list[Outcome]:
    outcomes, new_records = decide_config_changes(target.metadata, resources, incremental=incremental)
    if validate_only or not new_records:
        return outcomes
    target.commit_records(new_records)
    log.info("configs changed: %s", ", ".join(f"{r['resource_type']} {r['name']!r}" for r in new_records))
    try:
        await target.propagator.wait(target.propagator.update_metadata())
    except PropagationError as e:
        # Committed: a broker that missed it gets it with the next metadata push (or when it registers).
        log.warning("config change committed but not yet applied everywhere: %s", e)
    return outcomes


# ------------------------------------------------------------------------------------- CreatePartitions


def decide_new_partitions(metadata: ClusterMetadata, topic_name: str, count: int,
                          assignment: Sequence[Sequence[int]] | None) -> list:
    """The registrations of the partitions that bring `topic_name` to `count` (Kafka's
    ReplicationControlManager.createPartitions, with its checks and messages)."""
    topic = metadata.topics.get(topic_name)
    if topic is None:
        raise ControllerError(ErrorCode.unknown_topic_or_partition, f"Topic {topic_name} does not exist")
    current = len(topic.partitions)
    if count < current:
        raise ControllerError(ErrorCode.invalid_partitions,
                              f"The topic {topic_name} currently has {current} partition(s); {count} would not "
                              f"be an increase.")
    if count == current:
        raise ControllerError(ErrorCode.invalid_partitions, f"Topic already has {current} partition(s).")
    if count > MAX_PARTITIONS_PER_TOPIC:
        raise ControllerError(ErrorCode.invalid_partitions, f"Number of partitions: {count} larger than "
                              f"{MAX_PARTITIONS_PER_TOPIC}.")
    # A partition being reassigned lists its leaving replicas too (KIP-455): its target sets the factor.
    replication_factor = len(target_replicas(topic.partitions[0]))
    added = count - current
    if assignment is None:
        active = metadata.active_broker_ids()
        new = assign_replicas(active, added, replication_factor, start_partition_id=current,
                              racks={b: metadata.brokers[b].rack for b in active})
    else:
        new = _checked_assignment(metadata, assignment, added, replication_factor, current)
    return [new_partition(topic_name, topic.topic_id, index, replicas) for index, replicas in sorted(new.items())]


def _checked_assignment(metadata: ClusterMetadata, assignment: Sequence[Sequence[int]], added: int,
                        replication_factor: int, first: int) -> dict[int, tuple[int, ...]]:
    if len(assignment) != added:
        raise ControllerError(ErrorCode.invalid_replica_assignment,
                              f"Attempted to add {added} additional partition(s), but only {len(assignment)} "
                              f"assignment(s) were specified.")
    result = {}
    for offset, replicas in enumerate(assignment):
        index = first + offset
        if not replicas or len(replicas) > MAX_REPLICATION_FACTOR:
            raise ControllerError(ErrorCode.invalid_replica_assignment, f"partition {index}: an empty replica list")
        if not is_valid_replica_list(replicas):
            raise ControllerError(ErrorCode.invalid_replica_assignment,
                                  f"partition {index}: replicas {list(replicas)} contain duplicates or negatives")
        if len(replicas) != replication_factor:
            raise ControllerError(ErrorCode.invalid_replica_assignment,
                                  f"partition {index} has {len(replicas)} replicas; the topic's replication "
                                  f"factor is {replication_factor}")
        unknown = [r for r in replicas if r not in metadata.brokers]
        if unknown:
            raise ControllerError(ErrorCode.invalid_replica_assignment,
                                  f"partition {index}: brokers {unknown} are not registered")
        inactive = [r for r in replicas if not metadata.is_eligible(r)]
        if inactive:
            raise ControllerError(ErrorCode.invalid_replica_assignment,
                                  f"partition {index}: brokers {inactive} are fenced or shutting down")
        result[index] = tuple(replicas)
    return result


async def create_partitions(target: AdminTarget, topic_name: str, count: int,
                            assignment: Sequence[Sequence[int]] | None, *, validate_only: bool) -> None:
    """Raises ControllerError when refused; PropagationError when committed but not confirmed by a broker."""
    partitions = decide_new_partitions(target.metadata, topic_name, count, assignment)
    if validate_only:
        return
    target.commit_records([records.partition_record(p) for p in partitions])
    target.states.topic_created(partitions, target.metadata.live_broker_ids())
    log.info("topic %s now has %d partitions", topic_name, count)
    deliveries = target.propagator.leader_and_isr(partitions, is_new=True)
    deliveries += await target.propagator.push_metadata()  # thousands of partitions: built in chunks
    await target.propagator.wait(deliveries)



# ----------------------------------------------------------------------------------------- ElectLeaders


async def elect_leaders(target: AdminTarget, election_type: ElectionType,
                        requested: Sequence[tuple[str, int]] | None) -> dict[tuple[str, int], Answer]:
    """Elect, commit and tell the replicas; the answer per partition once they have the new leaders."""
    answers, changes = decide_elections(target.metadata, election_type, requested)
    if not changes:
        return answers
    target.commit_records([records.partition_record(p) for p in changes])
    target.states.partitions_changed(changes)
    log.info("%s leader election moved %d leaderships", election_type.name.lower(), len(changes))
    try:
        await target.propagator.wait(target.propagator.leader_and_isr(changes) + target.propagator.update_metadata())
    except PropagationError as e:
        log.warning("elected leaders not yet confirmed by every replica: %s", e)
    return answers
