"""The cluster metadata a broker acts on: brokers, topics, partition leadership and topic configs."""

import uuid
from dataclasses import dataclass, field

from replog.protocol.control import (
    LEADER_DURING_DELETE,
    UPDATE_METADATA_FULL,
    LeaderAndIsrRequest,
    UpdateMetadataRequest,
)
from replog.security.acls import binding_of
from replog.security.authorizer import AclIndex
from replog.server.properties import Listener
from replog.server.sasl import ScramCredential
from replog.server.scram_credentials import ScramCredentialTable


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
    # Advertised address per listener name. Metadata answers with the one of the listener the client came in
    # on; a broker whose listeners are unknown (only its inter-broker address came) is shown at host:port.
    listeners: dict[str, tuple[str, int]] = field(default_factory=dict)

    @classmethod
    def from_listener(cls, node_id: int, listener: Listener) -> "BrokerEndpoint":
        return cls(node_id, listener.host, listener.port)

    def address_for(self, listener_name: str) -> tuple[str, int]:
        return self.listeners.get(listener_name, (self.host, self.port))


@dataclass(slots=True)
class MetadataImage:
    cluster_id: str
    controller_id: int
    brokers: dict[int, BrokerEndpoint] = field(default_factory=dict)
    topics: dict[str, TopicMetadata] = field(default_factory=dict)
    # Dynamic broker configs by entity ("" the cluster-wide default, "1" broker 1), KIP-226.
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    # SCRAM credentials of the metadata log (KIP-554): the SASL SCRAM of every listener checks logins with them.
    scram: ScramCredentialTable = field(default_factory=ScramCredentialTable)
    # The cluster's ACL bindings, which this broker's authorizer shares (changed in place, never replaced).
    acls: AclIndex = field(default_factory=AclIndex)
    _acls_received: list = field(default_factory=list, repr=False)  # as the last full UpdateMetadata sent them

    def apply_update_metadata(self, request: UpdateMetadataRequest) -> None:
        """Take the controller's view: live brokers, and partition leadership for the topics listed."""
        self.brokers = {
            b.id: BrokerEndpoint(b.id, b.endpoints[0].host, b.endpoints[0].port, b.rack,
                                 {e.listener: (e.host, e.port) for e in b.endpoints})
            for b in request.live_brokers if b.endpoints
        }
        if request.type == UPDATE_METADATA_FULL:
            self.topics = {}
            self.broker_configs = {k: dict(v) for k, v in request.broker_configs.items()}
            self.scram.replace_all((m, user, ScramCredential(salt, stored, server, iterations))
                                   for m, user, salt, stored, server, iterations in request.scram_credentials)
            if request.acls != self._acls_received:  # rebuilt only when changed: pushes are frequent
                self.acls.replace_all(binding_of(*acl) for acl in request.acls)
                self._acls_received = list(request.acls)
        for state in request.topic_states:
            topic = self.topics.get(state.topic_name)
            if topic is None or topic.topic_id != state.topic_id:
                topic = TopicMetadata(state.topic_name, state.topic_id, {})
            topic.configs = dict(state.configs)
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

    def apply_leadership(self, request: LeaderAndIsrRequest) -> int:
        """Take the leadership a LeaderAndIsr brings, before the broker applies it; returns the partitions
        changed. KRaft's order: a broker publishes the new metadata image (what Metadata answers from) before
        ReplicaManager applies the leadership delta (BrokerMetadataPublisher.onMetadataUpdate), so clients
        asking this broker learn the new leaders without waiting for the apply and the UpdateMetadata the
        controller sends after it. A client may then reach a new leader that has not applied its
        leadership yet and get NOT_LEADER_OR_FOLLOWER, which it retries, as with Kafka.

        Only partitions the image already lists, of a topic with the same id, and only newer states (leader
        epoch, then partition epoch): a topic or partition known from a LeaderAndIsr alone would show only
        this broker's replicas; the UpdateMetadata that follows brings the whole view, and the brokers list.
        """
        changed = 0
        for topic_state in request.topic_states:
            topic = self.topics.get(topic_state.topic_name)
            if topic is None or topic.topic_id != topic_state.topic_id:
                continue
            for p in topic_state.partition_states:
                known = topic.partitions.get(p.partition_index)
                if known is None or (p.leader_epoch, p.partition_epoch) <= (known.leader_epoch,
                                                                            known.partition_epoch):
                    continue
                topic.partitions[p.partition_index] = PartitionMetadata(
                    p.leader, p.leader_epoch, p.partition_epoch, list(p.replicas), list(p.isr),
                    known.offline_replicas)
                changed += 1
        return changed
