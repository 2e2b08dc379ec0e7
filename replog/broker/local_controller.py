"""The controller of a single broker that has no controller quorum configured: it owns the topic metadata,
assigns every replica to itself, and persists its state atomically in the first log directory so a restart
keeps topic ids, leader epochs and producer ids.
"""

import json
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from kio.schema.errors import ErrorCode

from replog.log.checkpoint import write_atomically
from replog.log.dynamic_configs import (
    ConfigResource,
    InvalidConfigError,
    ResourceType,
    altered_entity,
    is_broker_entity_name,
)
from replog.security.acl_requests import AclChanges
from replog.security.acls import AclBinding
from replog.server.credential_store import format_scram_credential, parse_scram_credential
from replog.server.scram_credentials import Deletion, Upsertion, UserResult, apply_changes, decide_alterations

from .metadata import MetadataImage, PartitionMetadata, TopicMetadata

STATE_FILE = "replog-controller-state.json"
PRODUCER_ID_BLOCK = 1000
MAX_PARTITIONS_PER_TOPIC = 10_000  # as the cluster's controller (Kafka's MAX_PARTITIONS_PER_BATCH)


class TopicCreationError(Exception):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class LocalController:
    def __init__(self, directory: Path, image: MetadataImage, node_id: int, *, manages_topics: bool = True,
                 producer_id_base: int = 0) -> None:
        """manages_topics=False: a broker of a cluster, where topics belong to the cluster's controller and
        this object only hands out producer ids, from a range of its own (producer_id_base upwards)."""
        self._path = directory / STATE_FILE
        self.image = image
        self.node_id = node_id
        self.manages_topics = manages_topics
        self._next_producer_id = producer_id_base
        self._producer_id_limit = producer_id_base  # ids below this are reserved on disk
        self._load()

    def _load(self) -> None:
        if not self._path.exists():
            return
        state = json.loads(self._path.read_text())
        for data in state["topics"]:
            topic = TopicMetadata.from_json(data)
            self.image.topics[topic.name] = topic
        self.image.broker_configs = {k: dict(v) for k, v in state.get("broker_configs", {}).items()}
        self.image.acls.replace_all(AclBinding.from_json(fields) for fields in state.get("acls", ()))
        self.image.scram.replace_all((mechanism, user, parse_scram_credential(credential))
                                     for mechanism, user, credential in state.get("scram_credentials", ()))
        # Resume after the whole reserved block: ids handed out before a crash are never reused.
        self._next_producer_id = self._producer_id_limit = max(state["producer_id_limit"], self._producer_id_limit)

    def _persist(self) -> None:
        state = {"topics": [t.to_json() for t in self.image.topics.values()],
                 "producer_id_limit": self._producer_id_limit, "broker_configs": self.image.broker_configs,
                 "acls": [binding.to_json() for binding in sorted(self.image.acls)],
                 # Salt, stored and server keys, iterations: never the password (KIP-554).
                 "scram_credentials": [(mechanism, user, format_scram_credential(credential))
                                       for mechanism, user, credential in self.image.scram.items()]}
        write_atomically(self._path, json.dumps(state, indent=1).encode())

    def create_topic(self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str],
                     *, validate_only: bool = False) -> TopicMetadata:
        if not self.manages_topics:
            raise TopicCreationError(ErrorCode.not_controller, "topics of a cluster are created by its controller")
        if name in self.image.topics:
            raise TopicCreationError(ErrorCode.topic_already_exists, f"topic {name!r} already exists")
        if num_partitions <= 0:
            raise TopicCreationError(ErrorCode.invalid_partitions, "number of partitions must be positive")
        live = len(self.image.brokers)
        if replication_factor <= 0 or replication_factor > live:
            raise TopicCreationError(
                ErrorCode.invalid_replication_factor,
                f"replication factor {replication_factor} is not between 1 and the {live} live broker(s)")
        topic = TopicMetadata(name, uuid.uuid4(), {
            i: PartitionMetadata(self.node_id, 0, 0, [self.node_id], [self.node_id]) for i in range(num_partitions)
        }, dict(configs))
        if not validate_only:
            self.image.topics[name] = topic
            self._persist()
        return topic

    def delete_topic(self, name: str) -> TopicMetadata | None:
        if not self.manages_topics:
            return None
        topic = self.image.topics.pop(name, None)
        if topic is not None:
            self._persist()
        return topic

    def alter_configs(self, resources: list[ConfigResource], *, incremental: bool,
                      validate_only: bool) -> list[tuple[ErrorCode, str | None]]:
        """AlterConfigs / IncrementalAlterConfigs on a single node, with the controller's rules; per resource
        its error and message. Accepted changes are persisted together."""
        mentions = Counter((r.resource_type, r.name) for r in resources)
        outcomes: list[tuple[ErrorCode, str | None]] = []
        accepted = []
        for resource in resources:
            if mentions[(resource.resource_type, resource.name)] > 1:
                outcomes.append((ErrorCode.invalid_request, f"resource {resource.name!r} named twice"))
                continue
            if resource.resource_type == ResourceType.TOPIC:
                topic = self.image.topics.get(resource.name)
                if topic is None:
                    outcomes.append((ErrorCode.unknown_topic_or_partition, f"Topic {resource.name} does not exist"))
                    continue
                current = topic.configs
            elif resource.resource_type == ResourceType.BROKER and is_broker_entity_name(resource.name):
                current = self.image.broker_configs.get(resource.name, {})
            else:
                outcomes.append((ErrorCode.invalid_request, f"Unsupported resource {resource.resource_type} "
                                                            f"{resource.name!r}"))
                continue
            try:
                new = altered_entity(ResourceType(resource.resource_type), current, resource.changes,
                                     incremental=incremental)
            except InvalidConfigError as e:
                outcomes.append((ErrorCode.invalid_config, str(e)))
                continue
            outcomes.append((ErrorCode.none, None))
            accepted.append((resource, new))
        if accepted and not validate_only:
            for resource, new in accepted:
                if resource.resource_type == ResourceType.TOPIC:
                    self.image.topics[resource.name].configs = new
                elif new:
                    self.image.broker_configs[resource.name] = new
                else:
                    self.image.broker_configs.pop(resource.name, None)
            self._persist()
        return outcomes

    def create_partitions(self, name: str, count: int, assignment: list[list[int]] | None, *,
                          validate_only: bool = False) -> None:
        """Grow topic `name` to `count` partitions, each led by this node (the only broker)."""
        topic = self.image.topics.get(name)
        if not self.manages_topics:
            raise TopicCreationError(ErrorCode.not_controller, "partitions of a cluster are created by its controller")
        if topic is None:
            raise TopicCreationError(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist")
        current = len(topic.partitions)
        if count > MAX_PARTITIONS_PER_TOPIC:
            raise TopicCreationError(ErrorCode.invalid_partitions,
                                     f"Number of partitions: {count} larger than {MAX_PARTITIONS_PER_TOPIC}.")
        if count <= current:
            raise TopicCreationError(ErrorCode.invalid_partitions, f"The topic {name} currently has {current} "
                                     f"partition(s); {count} would not be an increase.")
        if assignment is not None:
            if len(assignment) != count - current:
                raise TopicCreationError(ErrorCode.invalid_replica_assignment,
                                         f"Attempted to add {count - current} additional partition(s), but only "
                                         f"{len(assignment)} assignment(s) were specified.")
            bad = [replicas for replicas in assignment if list(replicas) != [self.node_id]]
            if bad:
                raise TopicCreationError(ErrorCode.invalid_replica_assignment,
                                         f"replicas {bad[0]}: the only broker is {self.node_id}")
        if validate_only:
            return
        for index in range(current, count):
            topic.partitions[index] = PartitionMetadata(self.node_id, 0, 0, [self.node_id], [self.node_id])
        self._persist()

    def change_acls(self, changes: AclChanges) -> None:
        """Carry out a CreateAcls or DeleteAcls decided against this node's bindings (security/acl_requests.py)."""
        if not changes.added and not changes.removed:
            return
        for binding in changes.added:
            self.image.acls.add(binding)
        for binding in changes.removed:
            self.image.acls.remove(binding)
        self._persist()

    def alter_scram_credentials(self, deletions: Sequence[Deletion],
                                upsertions: Sequence[Upsertion]) -> list[UserResult]:
        """AlterUserScramCredentials on a single node, which keeps the credentials in its state file as a
        controller keeps them in its metadata log; decided with the controller's rules."""
        results, changes = decide_alterations(self.image.scram, deletions, upsertions)
        if changes:
            apply_changes(self.image.scram, changes)
            self._persist()
        return results

    def allocate_producer_id(self) -> int:
        if self._next_producer_id >= self._producer_id_limit:
            self._producer_id_limit = self._next_producer_id + PRODUCER_ID_BLOCK
            self._persist()
        producer_id = self._next_producer_id
        self._next_producer_id += 1
        return producer_id
