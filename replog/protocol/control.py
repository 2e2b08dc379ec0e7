"""Hand-written codecs for the controller-to-broker requests LeaderAndIsr (key 4), StopReplica (key 5) and
UpdateMetadata (key 6), with their responses.

kio has no schema for these APIs (Kafka 4 removed them along with ZooKeeper mode), so they are written here
from Kafka 3.x's message JSON specs. replog's own controller is the only sender, so each API has exactly one
version, the newest and flexible one: LeaderAndIsr v7, StopReplica v4, UpdateMetadata v8. Flexible means
compact strings and arrays, a tagged-field section after every struct, request header v2 and response
header v1 (see apis.py).

Decoders take the frame and the offset where the body starts, and reject truncated input and trailing bytes
with DecodeError. Array counts come from Reader.array_length, which bounds them by the bytes left, and
elements are appended one by one, so a hostile count never makes us allocate up front. Encoders return the
body only: no size prefix, no header.
"""

import uuid
from dataclasses import dataclass, field

from .control_fields import (
    ScramEntry,
    decode_broker_configs,
    decode_configs,
    decode_scram_credentials,
    encode_broker_configs,
    encode_configs,
    encode_scram_credentials,
    expect_end,
    read_count,
    read_int32s,
    write_int32s,
)
from .primitives import DecodeError, Reader, Writer

LEADER_AND_ISR_VERSION = 7
STOP_REPLICA_VERSION = 4
UPDATE_METADATA_VERSION = 8

UPDATE_METADATA_FULL = 2  # KIP-866's Type: the request lists every topic
LEADER_DURING_DELETE = -2  # Kafka's LeaderAndIsr.LeaderDuringDelete: the partition is being deleted

# UpdateMetadata v8 carries Type as tagged field 0 of the request (the other two APIs have no tagged fields).
_TAG_UPDATE_METADATA_TYPE = 0
# replog's extension: a LeaderAndIsr topic state carries the topic's configs (min.insync.replicas,
# retention...) in a tagged field, which Kafka's decoders skip as unknown. ZooKeeper-mode brokers read them
# from ZooKeeper; replog brokers have no other source. A high tag keeps clear of Kafka's own numbering.
_TAG_TOPIC_CONFIGS = 10_000
# The same extension on UpdateMetadata, which reaches every broker: each topic state carries its topic's
# configs (tag 10_000, as above), and the request the dynamic broker configs (tag 10_001: entity name, ""
# for the cluster default, and its configs), so DescribeConfigs on any broker and config changes that take
# effect at once (KIP-226) need no other channel.
_TAG_BROKER_CONFIGS = 10_001
# And the SCRAM credentials of the metadata log (KIP-554: KRaft brokers replay UserScramCredentialRecords; replog
# brokers get them here, in full with every full UpdateMetadata): the brokers' SASL SCRAM checks logins with them.
_TAG_SCRAM_CREDENTIALS = 10_003

Buffer = bytes | bytearray | memoryview


# --- LeaderAndIsr v7 -------------------------------------------------------------------------------------


@dataclass(slots=True)
class LeaderAndIsrPartitionState:
    topic_name: str  # not on the wire in v2+: the decoder copies it from the enclosing topic
    partition_index: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int  # "ZkVersion" before Kafka 3.2 renamed it
    replicas: list[int]
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)
    is_new: bool = False
    leader_recovery_state: int = 0  # 1 after an unclean leader election (KIP-704)


@dataclass(slots=True)
class LeaderAndIsrTopicState:
    topic_name: str
    topic_id: uuid.UUID
    partition_states: list[LeaderAndIsrPartitionState]
    configs: dict[str, str] = field(default_factory=dict)  # tagged field _TAG_TOPIC_CONFIGS


@dataclass(slots=True)
class LiveLeader:
    broker_id: int
    host_name: str
    port: int


@dataclass(slots=True)
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    topic_states: list[LeaderAndIsrTopicState]
    live_leaders: list[LiveLeader]
    type: int = 0  # KIP-516: 0 unknown, 1 incremental, 2 full
    is_kraft_controller: bool = False


@dataclass(slots=True)
class LeaderAndIsrPartitionError:
    partition_index: int
    error_code: int


@dataclass(slots=True)
class LeaderAndIsrTopicError:
    topic_id: uuid.UUID
    partition_errors: list[LeaderAndIsrPartitionError]


@dataclass(slots=True)
class LeaderAndIsrResponse:
    error_code: int
    topics: list[LeaderAndIsrTopicError]


def encode_leader_and_isr_request(request: LeaderAndIsrRequest) -> bytes:
    w = Writer()
    w.int32(request.controller_id)
    w.boolean(request.is_kraft_controller)
    w.int32(request.controller_epoch)
    w.int64(request.broker_epoch)
    w.int8(request.type)
    w.array_length(len(request.topic_states), compact=True)
    for topic in request.topic_states:
        w.string(topic.topic_name, compact=True)
        w.uuid(topic.topic_id)
        w.array_length(len(topic.partition_states), compact=True)
        for p in topic.partition_states:
            w.int32(p.partition_index)
            w.int32(p.controller_epoch)
            w.int32(p.leader)
            w.int32(p.leader_epoch)
            write_int32s(w, p.isr)
            w.int32(p.partition_epoch)
            write_int32s(w, p.replicas)
            write_int32s(w, p.adding_replicas)
            write_int32s(w, p.removing_replicas)
            w.boolean(p.is_new)
            w.int8(p.leader_recovery_state)
            w.empty_tagged_fields()
        w.tagged_fields({_TAG_TOPIC_CONFIGS: encode_configs(topic.configs)} if topic.configs else {})
    w.array_length(len(request.live_leaders), compact=True)
    for leader in request.live_leaders:
        w.int32(leader.broker_id)
        w.string(leader.host_name, compact=True)
        w.int32(leader.port)
        w.empty_tagged_fields()
    w.empty_tagged_fields()
    return bytes(w.buf)


def decode_leader_and_isr_request(buf: Buffer, offset: int) -> LeaderAndIsrRequest:
    r = Reader(buf, offset)
    controller_id = r.int32()
    is_kraft_controller = r.boolean()
    controller_epoch = r.int32()
    broker_epoch = r.int64()
    type_ = r.int8()
    topic_states = []
    for _ in range(read_count(r, "TopicStates")):
        topic = LeaderAndIsrTopicState(r.string(compact=True), r.uuid(), [])
        for _ in range(read_count(r, "PartitionStates")):
            topic.partition_states.append(_read_leader_and_isr_partition(r, topic.topic_name))
        configs = r.tagged_fields().get(_TAG_TOPIC_CONFIGS)
        if configs is not None:
            topic.configs = decode_configs(configs)
        topic_states.append(topic)
    live_leaders = []
    for _ in range(read_count(r, "LiveLeaders")):
        live_leaders.append(LiveLeader(r.int32(), r.string(compact=True), r.int32()))
        r.skip_tagged_fields()
    r.skip_tagged_fields()
    expect_end(r, "LeaderAndIsrRequest")
    return LeaderAndIsrRequest(controller_id, controller_epoch, broker_epoch, topic_states, live_leaders,
                               type_, is_kraft_controller)


def _read_leader_and_isr_partition(r: Reader, topic_name: str) -> LeaderAndIsrPartitionState:
    p = LeaderAndIsrPartitionState(
        topic_name,
        partition_index=r.int32(),
        controller_epoch=r.int32(),
        leader=r.int32(),
        leader_epoch=r.int32(),
        isr=read_int32s(r, "Isr"),
        partition_epoch=r.int32(),
        replicas=read_int32s(r, "Replicas"),
        adding_replicas=read_int32s(r, "AddingReplicas"),
        removing_replicas=read_int32s(r, "RemovingReplicas"),
        is_new=r.boolean(),
        leader_recovery_state=r.int8(),
    )
    r.skip_tagged_fields()
    return p


def encode_leader_and_isr_response(response: LeaderAndIsrResponse) -> bytes:
    w = Writer()
    w.int16(response.error_code)
    w.array_length(len(response.topics), compact=True)
    for topic in response.topics:
        w.uuid(topic.topic_id)
        w.array_length(len(topic.partition_errors), compact=True)
        for e in topic.partition_errors:
            w.int32(e.partition_index)
            w.int16(e.error_code)
            w.empty_tagged_fields()
        w.empty_tagged_fields()
    w.empty_tagged_fields()
    return bytes(w.buf)


def decode_leader_and_isr_response(buf: Buffer, offset: int) -> LeaderAndIsrResponse:
    r = Reader(buf, offset)
    response = LeaderAndIsrResponse(r.int16(), [])
    for _ in range(read_count(r, "Topics")):
        topic = LeaderAndIsrTopicError(r.uuid(), [])
        for _ in range(read_count(r, "PartitionErrors")):
            topic.partition_errors.append(LeaderAndIsrPartitionError(r.int32(), r.int16()))
            r.skip_tagged_fields()
        r.skip_tagged_fields()
        response.topics.append(topic)
    r.skip_tagged_fields()
    expect_end(r, "LeaderAndIsrResponse")
    return response


# --- UpdateMetadata v8 -----------------------------------------------------------------------------------


@dataclass(slots=True)
class UpdateMetadataPartitionState:
    topic_name: str  # not on the wire in v5+: the decoder copies it from the enclosing topic
    partition_index: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    zk_version: int
    replicas: list[int]
    offline_replicas: list[int] = field(default_factory=list)


@dataclass(slots=True)
class UpdateMetadataTopicState:
    topic_name: str
    topic_id: uuid.UUID
    partition_states: list[UpdateMetadataPartitionState]
    configs: dict[str, str] = field(default_factory=dict)  # tagged field _TAG_TOPIC_CONFIGS


@dataclass(slots=True)
class UpdateMetadataEndpoint:
    port: int
    host: str
    listener: str
    security_protocol: int = 0  # 0 = PLAINTEXT


@dataclass(slots=True)
class UpdateMetadataBroker:
    id: int
    endpoints: list[UpdateMetadataEndpoint]
    rack: str | None = None


@dataclass(slots=True)
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    topic_states: list[UpdateMetadataTopicState]
    live_brokers: list[UpdateMetadataBroker]
    type: int = 0  # tagged: 0 unknown, 1 incremental, 2 full snapshot (KIP-866)
    is_kraft_controller: bool = False
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)  # tagged: _TAG_BROKER_CONFIGS
    scram_credentials: list[ScramEntry] = field(default_factory=list)  # tagged: _TAG_SCRAM_CREDENTIALS


@dataclass(slots=True)
class UpdateMetadataResponse:
    error_code: int


def encode_update_metadata_request(request: UpdateMetadataRequest) -> bytes:
    w = Writer()
    w.int32(request.controller_id)
    w.boolean(request.is_kraft_controller)
    # Type is declared here in the schema but, being tagged, travels in the trailing tagged-field section.
    w.int32(request.controller_epoch)
    w.int64(request.broker_epoch)
    w.array_length(len(request.topic_states), compact=True)
    for topic in request.topic_states:
        w.string(topic.topic_name, compact=True)
        w.uuid(topic.topic_id)
        w.array_length(len(topic.partition_states), compact=True)
        for p in topic.partition_states:
            w.int32(p.partition_index)
            w.int32(p.controller_epoch)
            w.int32(p.leader)
            w.int32(p.leader_epoch)
            write_int32s(w, p.isr)
            w.int32(p.zk_version)
            write_int32s(w, p.replicas)
            write_int32s(w, p.offline_replicas)
            w.empty_tagged_fields()
        w.tagged_fields({_TAG_TOPIC_CONFIGS: encode_configs(topic.configs)} if topic.configs else {})
    w.array_length(len(request.live_brokers), compact=True)
    for broker in request.live_brokers:
        w.int32(broker.id)
        w.array_length(len(broker.endpoints), compact=True)
        for e in broker.endpoints:
            w.int32(e.port)
            w.string(e.host, compact=True)
            w.string(e.listener, compact=True)
            w.int16(e.security_protocol)
            w.empty_tagged_fields()
        w.string(broker.rack, compact=True)
        w.empty_tagged_fields()
    # Like Kafka, write a tagged field only when it differs from its default.
    tags = {}
    if request.type != 0:
        t = Writer()
        t.int8(request.type)
        tags[_TAG_UPDATE_METADATA_TYPE] = bytes(t.buf)
    if request.broker_configs:
        tags[_TAG_BROKER_CONFIGS] = encode_broker_configs(request.broker_configs)
    if request.scram_credentials:
        tags[_TAG_SCRAM_CREDENTIALS] = encode_scram_credentials(request.scram_credentials)
    w.tagged_fields(tags)
    return bytes(w.buf)


def decode_update_metadata_request(buf: Buffer, offset: int) -> UpdateMetadataRequest:
    r = Reader(buf, offset)
    controller_id = r.int32()
    is_kraft_controller = r.boolean()
    controller_epoch = r.int32()
    broker_epoch = r.int64()
    topic_states = []
    for _ in range(read_count(r, "TopicStates")):
        topic = UpdateMetadataTopicState(r.string(compact=True), r.uuid(), [])
        for _ in range(read_count(r, "PartitionStates")):
            topic.partition_states.append(_read_update_metadata_partition(r, topic.topic_name))
        configs = r.tagged_fields().get(_TAG_TOPIC_CONFIGS)
        if configs is not None:
            topic.configs = decode_configs(configs)
        topic_states.append(topic)
    live_brokers = []
    for _ in range(read_count(r, "LiveBrokers")):
        broker = UpdateMetadataBroker(r.int32(), [])
        for _ in range(read_count(r, "Endpoints")):
            broker.endpoints.append(UpdateMetadataEndpoint(r.int32(), r.string(compact=True),
                                                           r.string(compact=True), r.int16()))
            r.skip_tagged_fields()
        broker.rack = r.nullable_string(compact=True)
        r.skip_tagged_fields()
        live_brokers.append(broker)
    type_ = 0
    broker_configs: dict[str, dict[str, str]] = {}
    scram_credentials: list[ScramEntry] = []
    for tag, value in r.tagged_fields().items():
        if tag == _TAG_UPDATE_METADATA_TYPE:
            if len(value) != 1:
                raise DecodeError(f"UpdateMetadata Type tag of {len(value)} bytes, expected 1")
            type_ = Reader(value).int8()
        elif tag == _TAG_BROKER_CONFIGS:
            broker_configs = decode_broker_configs(value)
        elif tag == _TAG_SCRAM_CREDENTIALS:
            scram_credentials = decode_scram_credentials(value)
        # other tags are from a newer sender; ignoring them is what tagged fields are for
    expect_end(r, "UpdateMetadataRequest")
    return UpdateMetadataRequest(controller_id, controller_epoch, broker_epoch, topic_states, live_brokers,
                                 type_, is_kraft_controller, broker_configs, scram_credentials)


def _read_update_metadata_partition(r: Reader, topic_name: str) -> UpdateMetadataPartitionState:
    p = UpdateMetadataPartitionState(
        topic_name,
        partition_index=r.int32(),
        controller_epoch=r.int32(),
        leader=r.int32(),
        leader_epoch=r.int32(),
        isr=read_int32s(r, "Isr"),
        zk_version=r.int32(),
        replicas=read_int32s(r, "Replicas"),
        offline_replicas=read_int32s(r, "OfflineReplicas"),
    )
    r.skip_tagged_fields()
    return p


def encode_update_metadata_response(response: UpdateMetadataResponse) -> bytes:
    w = Writer()
    w.int16(response.error_code)
    w.empty_tagged_fields()
    return bytes(w.buf)


def decode_update_metadata_response(buf: Buffer, offset: int) -> UpdateMetadataResponse:
    r = Reader(buf, offset)
    response = UpdateMetadataResponse(r.int16())
    r.skip_tagged_fields()
    expect_end(r, "UpdateMetadataResponse")
    return response


# --- StopReplica v4 --------------------------------------------------------------------------------------


@dataclass(slots=True)
class StopReplicaPartitionState:
    partition_index: int
    leader_epoch: int  # -1 tells the broker to skip the epoch check (KIP-570)
    delete_partition: bool


@dataclass(slots=True)
class StopReplicaTopicState:
    topic_name: str
    partition_states: list[StopReplicaPartitionState]


@dataclass(slots=True)
class StopReplicaRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    topic_states: list[StopReplicaTopicState]
    is_kraft_controller: bool = False


@dataclass(slots=True)
class StopReplicaPartitionError:
    topic_name: str
    partition_index: int
    error_code: int


@dataclass(slots=True)
class StopReplicaResponse:
    error_code: int
    partition_errors: list[StopReplicaPartitionError]


def encode_stop_replica_request(request: StopReplicaRequest) -> bytes:
    w = Writer()
    w.int32(request.controller_id)
    w.boolean(request.is_kraft_controller)
    w.int32(request.controller_epoch)
    w.int64(request.broker_epoch)
    w.array_length(len(request.topic_states), compact=True)
    for topic in request.topic_states:
        w.string(topic.topic_name, compact=True)
        w.array_length(len(topic.partition_states), compact=True)
        for p in topic.partition_states:
            w.int32(p.partition_index)
            w.int32(p.leader_epoch)
            w.boolean(p.delete_partition)
            w.empty_tagged_fields()
        w.empty_tagged_fields()
    w.empty_tagged_fields()
    return bytes(w.buf)


def decode_stop_replica_request(buf: Buffer, offset: int) -> StopReplicaRequest:
    r = Reader(buf, offset)
    controller_id = r.int32()
    is_kraft_controller = r.boolean()
    controller_epoch = r.int32()
    broker_epoch = r.int64()
    topic_states = []
    for _ in range(read_count(r, "TopicStates")):
        topic = StopReplicaTopicState(r.string(compact=True), [])
        for _ in range(read_count(r, "PartitionStates")):
            topic.partition_states.append(StopReplicaPartitionState(r.int32(), r.int32(), r.boolean()))
            r.skip_tagged_fields()
        r.skip_tagged_fields()
        topic_states.append(topic)
    r.skip_tagged_fields()
    expect_end(r, "StopReplicaRequest")
    return StopReplicaRequest(controller_id, controller_epoch, broker_epoch, topic_states, is_kraft_controller)


def encode_stop_replica_response(response: StopReplicaResponse) -> bytes:
    w = Writer()
    w.int16(response.error_code)
    w.array_length(len(response.partition_errors), compact=True)
    for e in response.partition_errors:
        w.string(e.topic_name, compact=True)
        w.int32(e.partition_index)
        w.int16(e.error_code)
        w.empty_tagged_fields()
    w.empty_tagged_fields()
    return bytes(w.buf)


def decode_stop_replica_response(buf: Buffer, offset: int) -> StopReplicaResponse:
    r = Reader(buf, offset)
    response = StopReplicaResponse(r.int16(), [])
    for _ in range(read_count(r, "PartitionErrors")):
        response.partition_errors.append(StopReplicaPartitionError(r.string(compact=True), r.int32(), r.int16()))
        r.skip_tagged_fields()
    r.skip_tagged_fields()
    expect_end(r, "StopReplicaResponse")
    return response
