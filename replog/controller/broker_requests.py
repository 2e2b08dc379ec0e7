"""The requests the controller sends to brokers (LeaderAndIsr, UpdateMetadata, StopReplica), built from its
state, and the errors their responses report. Pure: the codecs are in replog/protocol/control.py.

Contents follow Kafka's ControllerBrokerRequestBatch (ZooKeeper-mode controller, 3.x), which is what the
brokers' handlers expect: a LeaderAndIsr carries the partitions a broker replicates plus the endpoints of
their leaders; an UpdateMetadata carries every live broker and every partition, or to a broker that has them, what changed
(metadata_push.py).
"""

from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey, response_header_version
from replog.protocol.control import (
    LEADER_AND_ISR_VERSION,
    STOP_REPLICA_VERSION,
    UPDATE_METADATA_VERSION,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
    LiveLeader,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataRequest,
    decode_leader_and_isr_response,
    decode_stop_replica_response,
    decode_update_metadata_response,
)
from replog.protocol.headers import decode_response_header

from .cluster import BrokerRegistration, ClusterMetadata, TopicRegistration
from .metadata_push import UpdatePlanner
from .registry import PartitionRegistration

LISTENER_NAME = "PLAINTEXT"
SECURITY_PROTOCOL_PLAINTEXT = 0
EPOCH_DURING_DELETE = -2  # Kafka's LeaderAndIsr.EpochDuringDelete: StopReplica skips the epoch check

# (partition label such as "topic-0", or None for the whole request; the error)
ResponseErrors = list[tuple[str | None, ErrorCode]]


def leader_and_isr_request(controller_id: int, controller_epoch: int, broker: BrokerRegistration,
                           partitions: Iterable[PartitionRegistration], metadata: ClusterMetadata, *,
                           is_new: bool = False) -> LeaderAndIsrRequest:
    """The LeaderAndIsr for `broker` about `partitions` (each of which it replicates)."""
    topic_states: dict[str, LeaderAndIsrTopicState] = {}
    for p in partitions:
        assert broker.broker_id in p.replicas, (broker, p)
        state = topic_states.get(p.topic)
        if state is None:  # not setdefault: that would build a topic state and copy its configs per partition
            state = topic_states[p.topic] = LeaderAndIsrTopicState(p.topic, p.topic_id, [],
                                                                   dict(metadata.topics[p.topic].configs))
        state.partition_states.append(LeaderAndIsrPartitionState(
            p.topic, p.partition, controller_epoch, p.leader, p.leader_epoch, list(p.isr), p.partition_epoch,
            list(p.replicas), list(p.adding_replicas), list(p.removing_replicas), is_new=is_new,
            leader_recovery_state=int(p.leader_recovery_state)))
    leader_ids = {s.leader for t in topic_states.values() for s in t.partition_states}
    # Kafka sends only the leaders that are alive; a follower of a dead leader waits for the next election.
    live = metadata.live_broker_ids()
    live_leaders = [LiveLeader(b.broker_id, b.host, b.port)
                    for b in sorted(metadata.brokers.values(), key=lambda b: b.broker_id)
                    if b.broker_id in leader_ids and b.broker_id in live]
    return LeaderAndIsrRequest(controller_id, controller_epoch, broker.epoch, list(topic_states.values()),
                               live_leaders)


def update_metadata_request(controller_id: int, controller_epoch: int, broker: BrokerRegistration,
                            metadata: ClusterMetadata) -> UpdateMetadataRequest:
    """A full snapshot (KIP-866 type 2): every live broker, every partition of every topic; the propagator
    sends only changes to a broker that has one (metadata_push.py)."""
    request = UpdatePlanner(metadata, None, None, controller_epoch).run().request(
        controller_id, broker.epoch, live_brokers(metadata))
    assert request is not None  # a full request always says something
    return request


def live_brokers(metadata: ClusterMetadata) -> list[UpdateMetadataBroker]:
    """UpdateMetadata's LiveBrokers: the unfenced brokers (controlled shutdown included), by id."""
    live = metadata.live_broker_ids()
    return [UpdateMetadataBroker(b.broker_id, _endpoints(b), b.rack)
            for b in sorted(metadata.brokers.values(), key=lambda b: b.broker_id) if b.broker_id in live]


def _endpoints(broker: BrokerRegistration) -> list[UpdateMetadataEndpoint]:
    """Every listener the broker registered, the inter-broker one first (brokers take the first as the
    broker's address); a registration without listeners (an older record) has just its address."""
    if not broker.listeners:
        return [UpdateMetadataEndpoint(broker.port, broker.host, LISTENER_NAME, SECURITY_PROTOCOL_PLAINTEXT)]
    return [UpdateMetadataEndpoint(port, host, name, protocol) for name, host, port, protocol in broker.listeners]


def stop_replica_request(controller_id: int, controller_epoch: int, broker: BrokerRegistration,
                         topic: TopicRegistration, *, delete: bool) -> StopReplicaRequest:
    """Stop `broker`'s replicas of `topic`; with delete, as Kafka's topic deletion does, drop their logs."""
    states = [StopReplicaPartitionState(p.partition, EPOCH_DURING_DELETE if delete else p.leader_epoch, delete)
              for p in topic.partitions.values() if broker.broker_id in p.replicas]
    assert states, (broker, topic.name)
    return StopReplicaRequest(controller_id, controller_epoch, broker.epoch,
                              [StopReplicaTopicState(topic.name, states)])


def stop_partition_request(controller_id: int, controller_epoch: int, broker: BrokerRegistration,
                           partition: PartitionRegistration, *, delete: bool) -> StopReplicaRequest:
    """Stop `broker`'s replica of one partition, which a reassignment removed from it (so it is no longer in
    partition.replicas); the partition's current leader epoch fences an older StopReplica."""
    assert broker.broker_id not in partition.replicas, (broker, partition)
    states = [StopReplicaPartitionState(partition.partition, partition.leader_epoch, delete)]
    return StopReplicaRequest(controller_id, controller_epoch, broker.epoch,
                              [StopReplicaTopicState(partition.topic, states)])


# ------------------------------------------------------------------------------------------- responses


def leader_and_isr_errors(frame: bytearray, request: LeaderAndIsrRequest) -> ResponseErrors:
    response = decode_leader_and_isr_response(frame, _body_offset(frame, ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION))
    if response.error_code != ErrorCode.none:
        return [(None, ErrorCode(response.error_code))]
    names = {t.topic_id: t.topic_name for t in request.topic_states}
    errors: ResponseErrors = []
    answered = 0
    for topic in response.topics:
        for p in topic.partition_errors:
            answered += 1
            # Per partition, STALE_CONTROLLER_EPOCH means "I already have this leader and partition epoch or
            # a newer one": a resend whose first answer was lost, or a resync of a broker that kept its
            # state. This controller's state is the newest there is, so the broker has exactly it.
            if p.error_code not in (ErrorCode.none, ErrorCode.stale_controller_epoch):
                errors.append((f"{names.get(topic.topic_id, topic.topic_id)}-{p.partition_index}",
                               ErrorCode(p.error_code)))
    expected = sum(len(t.partition_states) for t in request.topic_states)
    if answered != expected:
        errors.append((None, ErrorCode.unknown_server_error))  # the broker skipped partitions: a bug there
    return errors


def update_metadata_errors(frame: bytearray) -> ResponseErrors:
    response = decode_update_metadata_response(frame, _body_offset(frame, ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION))
    return [] if response.error_code == ErrorCode.none else [(None, ErrorCode(response.error_code))]


def stop_replica_errors(frame: bytearray) -> ResponseErrors:
    response = decode_stop_replica_response(frame, _body_offset(frame, ApiKey.STOP_REPLICA, STOP_REPLICA_VERSION))
    if response.error_code != ErrorCode.none:
        return [(None, ErrorCode(response.error_code))]
    return [(f"{e.topic_name}-{e.partition_index}", ErrorCode(e.error_code))
            for e in response.partition_errors if e.error_code != ErrorCode.none]


def _body_offset(frame: bytearray, api_key: int, version: int) -> int:
    _, offset = decode_response_header(frame, response_header_version(api_key, version))
    return offset

