"""The cluster metadata a broker acts on: brokers, topics, partition leadership and topic configs."""

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from replog.log.config import LogConfig
from replog.protocol.control import UpdateMetadataRequest
from replog.server.properties import Listener

UPDATE_METADATA_FULL = 2  # KIP-866's Type: the request lists every topic
LEADER_DURING_DELETE = -2  # Kafka's LeaderAndIsr.LeaderDuringDelete: the partition is being deleted

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")

# Topic configs replog understands (Kafka's names); anything else is INVALID_CONFIG.
TOPIC_CONFIG_KEYS = frozenset({
    "segment.bytes", "segment.ms", "retention.ms", "retention.bytes", "max.message.bytes",
    "index.interval.bytes", "min.insync.replicas", "unclean.leader.election.enable", "cleanup.policy",
    "compression.type", "message.timestamp.type",
})


def topic_config_error(configs: Mapping[str, str], base: LogConfig | None = None) -> str | None:
    """Why topic configs are unacceptable (checked by CreateTopics and by the controller), or None."""
    unknown = sorted(set(configs) - TOPIC_CONFIG_KEYS)
    if unknown:
        return f"unknown topic configs: {', '.join(unknown)}"
    if configs.get("cleanup.policy", "delete") != "delete":
        return "only cleanup.policy=delete is supported"
    try:
        LogConfig.from_topic_configs(configs, base)
        min_isr = int(configs.get("min.insync.replicas", "1"))
    except ValueError as e:
        return str(e)
    if min_isr < 1:
        return "min.insync.replicas must be at least 1"
    return None


def topic_name_error(name: str) -> str | None:
    """Why a topic name is illegal (Kafka's Topic.validate rules), or None."""
    if not name or name in (".", ".."):
        return f"topic name {name!r} is illegal"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL_TOPIC_NAME.match(name):
        return f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


@dataclass(slots=True)
class PartitionMetadata:
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: list[int]
    isr: list[int]
    # Replicas on a failed log dir (UpdateMetadata's OfflineReplicas, KIP-112); not persisted: the controller
    # sends a full snapshot to every broker that registers.
    offline_replicas: list[int] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"leader": self.leader, "leader_epoch": self.leader_epoch, "partition_epoch": self.partition_epoch,
                "replicas": self.replicas, "isr": self.isr}

    @classmethod
    def from_json(cls, data: dict) -> "PartitionMetadata":
        return cls(data["leader"], data["leader_epoch"], data["partition_epoch"], list(data["replicas"]),
                   list(data["isr"]))


@dataclass(slots=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionMetadata]
    configs: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"name": self.name, "topic_id": str(self.topic_id), "configs": self.configs,
                "partitions": {str(i): p.to_json() for i, p in self.partitions.items()}}

    @classmethod
    def from_json(cls, data: dict) -> "TopicMetadata":
        partitions = {int(i): PartitionMetadata.from_json(p) for i, p in data["partitions"].items()}
        return cls(data["name"], uuid.UUID(data["topic_id"]), partitions, dict(data["configs"]))


@dataclass(slots=True)
class BrokerEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @classmethod
    def from_listener(cls, node_id: int, listener: Listener) -> "BrokerEndpoint":
        return cls(node_id, listener.host, listener.port)


@dataclass(slots=True)
class MetadataImage:
    cluster_id: str
    controller_id: int
    brokers: dict[int, BrokerEndpoint] = field(default_factory=dict)
    topics: dict[str, TopicMetadata] = field(default_factory=dict)

    def apply_update_metadata(self, request: UpdateMetadataRequest) -> None:
        """Take the controller's view: live brokers, and partition leadership for the topics listed."""
        self.brokers = {
            b.id: BrokerEndpoint(b.id, b.endpoints[0].host, b.endpoints[0].port, b.rack)
            for b in request.live_brokers if b.endpoints
        }
        if request.type == UPDATE_METADATA_FULL:
            self.topics = {}
        for state in request.topic_states:
            topic = self.topics.get(state.topic_name)
            if topic is None or topic.topic_id != state.topic_id:
                topic = TopicMetadata(state.topic_name, state.topic_id, {})
            for p in state.partition_states:
                if p.leader == LEADER_DURING_DELETE:
                    topic.partitions.pop(p.partition_index, None)
                else:
                    topic.partitions[p.partition_index] = PartitionMetadata(
                        p.leader, p.leader_epoch, p.zk_version, list(p.replicas), list(p.isr),
                        list(p.offline_replicas))
            if topic.partitions:
                self.topics[topic.name] = topic
            else:
                self.topics.pop(topic.name, None)
