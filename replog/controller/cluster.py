"""The controller's state: registered brokers, and topics with their partition registrations.

Sans-IO and single-threaded, like Kafka's QuorumController ("avoids the need for complex locking"). Every
method validates completely before it changes anything, and raises ControllerError with the Kafka error code
a request for the same change would get. AlterPartition is split Kafka's way into decide (pure: the
response and the new registrations) and apply, so the next step, persisting decisions as records, slots in
between.
"""

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from replog.log.dynamic_configs import topic_configs_error
from replog.log.partition_log import TopicPartition
from replog.protocol.topics import topic_name_error
from replog.security.authorizer import AclIndex
from replog.server.scram_credentials import ScramCredentialTable

from . import reassignment
from .registry import (
    MAX_REPLICATION_FACTOR,
    PartitionRegistration,
    apply_isr_change,
    change_isr,
    elect_leader,
    is_valid_isr,
    is_valid_replica_list,
    new_partition,
    validate_alter_partition,
)

# KRaft's broker epoch is the offset of the broker's RegisterBrokerRecord; -1 means none, and is also how
# an AlterPartition v3 ISR member says "do not check".
NO_BROKER_EPOCH = -1
MAX_PARTITIONS_PER_TOPIC = 10_000  # Kafka's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH
MAX_BROKERS = 10_000
MAX_TOPICS = 100_000


NO_OFFLINE_REPLICAS: frozenset[int] = frozenset()


class ControllerError(Exception):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(f"{error_code.name.upper()}: {message}")
        self.error_code = error_code


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """Kafka's BrokerRegistration: where a broker listens, its epoch, and whether it may lead or join an ISR.

    A fenced broker is missing from clients' metadata and from every ISR; one in controlled shutdown is
    still listed but leads nothing new and leaves every ISR (KIP-841).
    """

    broker_id: int
    host: str
    port: int
    epoch: int = NO_BROKER_EPOCH
    incarnation_id: uuid.UUID | None = None  # a new one each time the broker process starts
    rack: str | None = None
    fenced: bool = False
    in_controlled_shutdown: bool = False
    # Every listener the broker registered, (name, host, port, security protocol id), the inter-broker one
    # (host:port above) first; UpdateMetadata carries them all so each broker answers Metadata per listener.
    listeners: tuple[tuple[str, str, int, int], ...] = ()

    def __post_init__(self) -> None:
        assert self.broker_id >= 0, self
        assert 0 < self.port < 65536, self
        assert not (self.fenced and self.in_controlled_shutdown), self

    @property
    def is_active(self) -> bool:
        """May lead and join ISRs (Kafka's ClusterControlManager.isActive)."""
        return not self.fenced and not self.in_controlled_shutdown


@dataclass(slots=True)
class TopicRegistration:
    name: str
    topic_id: uuid.UUID
    configs: dict[str, str]
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AlterPartitionDecision:
    response: dict[str, Any]  # the AlterPartition response body, for messages.encode_response
    changes: list[PartitionRegistration]  # new registrations to apply; empty when nothing changed


class ClusterMetadata:
    def __init__(self) -> None:
        self.brokers: dict[int, BrokerRegistration] = {}
        self.topics: dict[str, TopicRegistration] = {}
        self._topic_names_by_id: dict[uuid.UUID, str] = {}
        # Replicas in log dirs their broker reported failed (KIP-112): offline until the broker registers
        # again (restarts). Not in the metadata log: a broker keeps reporting its offline dirs in every
        # heartbeat, so a restarted controller learns them again.
        self._offline_replicas: dict[int, set[TopicPartition]] = {}
        # Dynamic broker configs (KIP-226) by entity name: "" is the cluster-wide default, "1" broker 1.
        self.broker_configs: dict[str, dict[str, str]] = {}
        # SCRAM credentials (KIP-554): salt, stored and server keys, iterations, by (mechanism, user).
        self.scram = ScramCredentialTable()
        # The cluster's first records (the admin's credential) are in the log: written once, on first start.
        self.bootstrapped = False
        # The ACL bindings every broker's authorizer decides on (KRaft's AccessControlEntryRecords).
        self.acls = AclIndex()
        # Counts the changes to partition registrations (new, changed, deleted topics' partitions): a
        # request built over several turns of the event loop checks it did not miss one (metadata_push.py).
        self.partition_changes = 0

    # ----------------------------------------------------------------------------------------- brokers

    def add_broker(self, broker: BrokerRegistration) -> None:
        """Register a broker; registering an id again replaces its address (a broker restarted elsewhere)."""
        if broker.broker_id not in self.brokers and len(self.brokers) >= MAX_BROKERS:
            raise ControllerError(ErrorCode.invalid_request, f"more than {MAX_BROKERS} brokers")
        self.brokers[broker.broker_id] = broker

    def remove_broker(self, broker_id: int) -> BrokerRegistration:
        broker = self.brokers.pop(broker_id, None)
        if broker is None:
            raise ControllerError(ErrorCode.broker_not_available, f"broker {broker_id} is not registered")
        return broker

    def is_eligible(self, broker_id: int) -> bool:
        """May the broker lead or join an ISR (KIP-841)? Registered, unfenced, not shutting down."""
        broker = self.brokers.get(broker_id)
        return broker is not None and broker.is_active

    def active_broker_ids(self) -> list[int]:
        return sorted(b for b, registration in self.brokers.items() if registration.is_active)

    def live_broker_ids(self) -> set[int]:
        """The brokers clients see in Metadata: registered and unfenced (controlled shutdown included)."""
        return {b for b, registration in self.brokers.items() if not registration.fenced}

    def mark_replicas_offline(self, broker_id: int, keys: Iterable[TopicPartition]) -> list[PartitionRegistration]:
        """Record `broker_id`'s replicas of `keys` as offline; returns the registrations of those newly so
        (unknown partitions, say of a topic deleted meanwhile, are skipped)."""
        offline = self._offline_replicas.setdefault(broker_id, set())
        newly = []
        for key in keys:
            topic = self.topics.get(key.topic)
            registration = topic.partitions.get(key.partition) if topic is not None else None
            if registration is not None and broker_id in registration.replicas and key not in offline:
                offline.add(key)
                newly.append(registration)
        return newly

    def clear_offline_replicas(self, broker_id: int) -> None:
        """The broker restarted: its log dirs are back, or it reports the failed ones again."""
        self._offline_replicas.pop(broker_id, None)

    @property
    def has_offline_replicas(self) -> bool:
        return any(self._offline_replicas.values())

    def offline_replicas_of(self, partition: PartitionRegistration) -> frozenset[int]:
        """The replicas of `partition` in failed log dirs."""
        if not self._offline_replicas:
            return NO_OFFLINE_REPLICAS
        key = TopicPartition(partition.topic, partition.partition)
        return frozenset(b for b, keys in self._offline_replicas.items() if key in keys)

    def leads_any(self, broker_id: int) -> bool:
        return any(p.leader == broker_id for t in self.topics.values() for p in t.partitions.values())

    # ------------------------------------------------------------------------------------------ topics

    def new_topic(self, name: str, assignment: Mapping[int, Sequence[int]],
                  configs: Mapping[str, str]) -> TopicRegistration:
        """A valid new topic with the given replica assignment (not yet added; see add_topic): every replica
        in sync, the first replica leads."""
        self._check_new_topic(name, assignment, configs)
        topic = TopicRegistration(name, uuid.uuid4(), dict(configs))
        assert topic.topic_id not in self._topic_names_by_id
        for index in range(len(assignment)):
            topic.partitions[index] = new_partition(name, topic.topic_id, index, assignment[index])
        return topic

    def add_topic(self, topic: TopicRegistration) -> None:
        assert topic.name not in self.topics and topic.topic_id not in self._topic_names_by_id, topic.name
        self.topics[topic.name] = topic
        self._topic_names_by_id[topic.topic_id] = topic.name
        self.partition_changes += 1

    def create_topic(self, name: str, assignment: Mapping[int, Sequence[int]],
                     configs: Mapping[str, str]) -> TopicRegistration:
        topic = self.new_topic(name, assignment, configs)
        self.add_topic(topic)
        return topic

    def _check_new_topic(self, name: str, assignment: Mapping[int, Sequence[int]],
                         configs: Mapping[str, str]) -> None:
        invalid_name = topic_name_error(name)
        if invalid_name is not None:
            raise ControllerError(ErrorCode.invalid_topic_exception, invalid_name)
        if name in self.topics:
            raise ControllerError(ErrorCode.topic_already_exists, f"topic {name!r} already exists")
        if len(self.topics) >= MAX_TOPICS:
            raise ControllerError(ErrorCode.invalid_request, f"more than {MAX_TOPICS} topics")
        if not 0 < len(assignment) <= MAX_PARTITIONS_PER_TOPIC:
            raise ControllerError(ErrorCode.invalid_partitions,
                                  f"{len(assignment)} partitions, not between 1 and {MAX_PARTITIONS_PER_TOPIC}")
        if sorted(assignment) != list(range(len(assignment))):
            raise ControllerError(ErrorCode.invalid_replica_assignment,
                                  "partitions must be numbered consecutively from 0")
        replication_factor = len(assignment[0])
        for index, replicas in sorted(assignment.items()):
            self._check_replicas(index, replicas, replication_factor)
        config_error = topic_configs_error(configs)
        if config_error is not None:
            raise ControllerError(ErrorCode.invalid_config, config_error)

    def _check_replicas(self, index: int, replicas: Sequence[int], replication_factor: int) -> None:
        # Kafka's ReplicationControlManager.createTopic checks a manual assignment the same way.
        if not 0 < len(replicas) <= MAX_REPLICATION_FACTOR or not is_valid_replica_list(replicas):
            raise ControllerError(ErrorCode.invalid_replica_assignment,
                                  f"partition {index}: replicas {list(replicas)} are empty, negative or repeated")
        if len(replicas) != replication_factor:
            raise ControllerError(ErrorCode.invalid_replication_factor,
                                  f"partition {index} has {len(replicas)} replicas, partition 0 has "
                                  f"{replication_factor}")
        unknown = [r for r in replicas if r not in self.brokers]
        if unknown:
            raise ControllerError(ErrorCode.invalid_replica_assignment,
                                  f"partition {index}: brokers {unknown} are not registered")

    def delete_topic(self, name: str) -> TopicRegistration:
        topic = self.topics.pop(name, None)
        if topic is None:
            raise ControllerError(ErrorCode.unknown_topic_or_partition, f"no topic {name!r}")
        del self._topic_names_by_id[topic.topic_id]
        for keys in self._offline_replicas.values():  # a topic created again with this name starts afresh
            keys.difference_update([k for k in keys if k.topic == name])
        self.partition_changes += 1
        return topic

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicRegistration | None:
        name = self._topic_names_by_id.get(topic_id)
        return None if name is None else self.topics[name]

    def registration(self, topic: str, partition: int) -> PartitionRegistration:
        registration = self.topics[topic].partitions.get(partition) if topic in self.topics else None
        if registration is None:
            raise ControllerError(ErrorCode.unknown_topic_or_partition, f"no partition {topic}-{partition}")
        return registration

    def partitions_with_replica(self, broker_id: int) -> list[PartitionRegistration]:
        return [p for t in self.topics.values() for p in t.partitions.values() if broker_id in p.replicas]

    # -------------------------------------------------------------------------------------- leadership

    def elect_leader(self, topic: str, partition: int, leader: int,
                     isr: Sequence[int] | None = None) -> PartitionRegistration:
        """Make `leader` lead with `isr` (default: the current ISR); the leader must be a live ISR member."""
        current = self.registration(topic, partition)
        isr = current.isr if isr is None else tuple(isr)
        if not is_valid_isr(current.replicas, isr) or leader not in isr:
            raise ControllerError(ErrorCode.invalid_request,
                                  f"{topic}-{partition}: leader {leader} and ISR {list(isr)} do not fit "
                                  f"replicas {list(current.replicas)}")
        if leader not in self.brokers:
            raise ControllerError(ErrorCode.eligible_leaders_not_available,
                                  f"{topic}-{partition}: broker {leader} is not registered")
        changed = elect_leader(current, leader, isr)
        self.apply([changed])
        return changed

    def set_isr(self, topic: str, partition: int, isr: Sequence[int]) -> PartitionRegistration:
        """Change the ISR under the current leader, which must stay in it."""
        current = self.registration(topic, partition)
        if not is_valid_isr(current.replicas, isr) or current.leader not in isr:
            raise ControllerError(ErrorCode.invalid_request,
                                  f"{topic}-{partition}: ISR {list(isr)} must be replicas and keep leader "
                                  f"{current.leader}")
        changed = change_isr(current, isr)
        self.apply([changed])
        return changed

    def apply(self, changes: Iterable[PartitionRegistration]) -> None:
        for registration in changes:
            topic = self.topics[registration.topic]
            current = topic.partitions.get(registration.partition)  # None while replaying a new topic
            assert registration.topic_id == topic.topic_id, (registration, topic.topic_id)
            if current is not None:
                assert registration.partition_epoch > current.partition_epoch, (registration, current)
                assert registration.leader_epoch >= current.leader_epoch, (registration, current)
            topic.partitions[registration.partition] = registration
            self.partition_changes += 1

    # ---------------------------------------------------------------------------------- AlterPartition

    def decide_alter_partition(self, request: Any, version: int) -> AlterPartitionDecision:
        """The answer to a decoded AlterPartition v2/v3 request; changes nothing (see apply).

        Kafka's ReplicationControlManager.alterPartition: the sender's broker epoch must be its registered
        one (else STALE_BROKER_EPOCH for the whole request), then each partition is validated on its own.
        """
        assert version in (2, 3)
        sender = self.brokers.get(request.broker_id)
        if sender is None or sender.epoch != request.broker_epoch:
            return AlterPartitionDecision(alter_partition_error(ErrorCode.stale_broker_epoch), [])
        decided: dict[tuple[uuid.UUID, int], PartitionRegistration] = {}  # later entries see earlier ones
        topics = []
        for topic_data in request.topics:
            topic = self.topic_by_id(topic_data.topic_id)
            answers = [self._decide_partition(request.broker_id, topic, p, version, decided)
                       for p in topic_data.partitions]
            topics.append({"topic_id": topic_data.topic_id, "partitions": answers})
        response = {"throttle_time": 0, "error_code": ErrorCode.none, "topics": topics}
        return AlterPartitionDecision(response, list(decided.values()))

    def _decide_partition(self, broker_id: int, topic: TopicRegistration | None, data: Any, version: int,
                          decided: dict) -> dict[str, Any]:
        if topic is None:
            return _partition_error(data.partition_index, ErrorCode.unknown_topic_id)
        key = (topic.topic_id, data.partition_index)
        current = decided.get(key) or topic.partitions.get(data.partition_index)
        if current is None:
            return _partition_error(data.partition_index, ErrorCode.unknown_topic_or_partition)
        new_isr, is_eligible = self._isr_and_eligibility(data, version)
        # A replica in a failed log dir cannot rejoin the ISR (KIP-858), though a fetch it sent before the
        # failure may still make the leader think it caught up.
        offline = self.offline_replicas_of(current)
        error = validate_alter_partition(
            current, broker_id=broker_id, leader_epoch=data.leader_epoch, new_isr=new_isr,
            partition_epoch=data.partition_epoch,
            is_eligible=lambda replica: replica not in offline and is_eligible(replica),
            leader_recovery_state=data.leader_recovery_state)
        if error != ErrorCode.none:
            return _partition_error(data.partition_index, error)
        changed = apply_isr_change(current, new_isr, leader_recovery_state=data.leader_recovery_state)
        # KIP-455: the ISR change that brings the last adding replica in completes a reassignment, in the
        # same record (Kafka's PartitionChangeBuilder). A leader that is removed by it sees a newer leader
        # epoch in the answer and waits for its LeaderAndIsr.
        completed = reassignment.maybe_complete(changed, self.active_broker_ids())
        if completed is not None:
            changed = completed.registration
        if changed is not current:
            decided[key] = changed
        return {"partition_index": data.partition_index, "error_code": ErrorCode.none,
                "leader_id": changed.leader, "leader_epoch": changed.leader_epoch, "isr": list(changed.isr),
                "leader_recovery_state": int(changed.leader_recovery_state),
                "partition_epoch": changed.partition_epoch}

    def _isr_and_eligibility(self, data: Any, version: int) -> tuple[list[int], Callable[[int], bool]]:
        if version < 3:
            return list(data.new_isr), self.is_eligible
        # v3 (KIP-903): each member comes with the broker epoch the leader saw it fetch with; a member
        # that re-registered since (a new epoch) may have lost data the leader thinks it has.
        seen_epochs = {member.broker_id: member.broker_epoch for member in data.new_isr_with_epochs}

        def is_eligible(broker_id: int) -> bool:
            epoch = seen_epochs[broker_id]
            return self.is_eligible(broker_id) and epoch in (NO_BROKER_EPOCH, self.brokers[broker_id].epoch)

        return [member.broker_id for member in data.new_isr_with_epochs], is_eligible


def alter_partition_error(error: ErrorCode) -> dict[str, Any]:
    """An AlterPartition response failing the whole request (Kafka's getErrorResponse: no topics)."""
    return {"throttle_time": 0, "error_code": error, "topics": []}


def _partition_error(partition_index: int, error: ErrorCode) -> dict[str, Any]:
    # Kafka leaves the state fields at Java's default 0 here; -1 cannot be mistaken for a real leader or epoch.
    return {"partition_index": partition_index, "error_code": error, "leader_id": -1, "leader_epoch": -1,
            "isr": [], "leader_recovery_state": 0, "partition_epoch": -1}
