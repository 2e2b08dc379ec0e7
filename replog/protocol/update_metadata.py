"""UpdateMetadata v8 (key 6) and its response: the controller tells every broker the live brokers and every
partition's state, and (replog's extension) the topic and dynamic broker configs, the ACL bindings and the
SCRAM credentials (see control.py)."""

import uuid
from dataclasses import dataclass, field

from .control_fields import (
    TAG_TOPIC_CONFIGS,
    AclTuple,
    Buffer,
    ScramEntry,
    decode_acls,
    decode_broker_configs,
    decode_configs,
    decode_scram_credentials,
    encode_acls,
    encode_broker_configs,
    encode_configs,
    encode_scram_credentials,
    expect_end,
    read_count,
    read_int32s,
    write_int32s,
)
from .primitives import DecodeError, Reader, Writer

UPDATE_METADATA_VERSION = 8
UPDATE_METADATA_FULL = 2  # KIP-866's Type: the request lists every topic

# UpdateMetadata v8 carries Type as tagged field 0 of the request.
_TAG_UPDATE_METADATA_TYPE = 0
# replog's extension: the request carries the dynamic broker configs (entity name, "" for the cluster
# default, and its configs), so DescribeConfigs on any broker and config changes that take effect at once
# (KIP-226) need no other channel.
_TAG_BROKER_CONFIGS = 10_001
# And the SCRAM credentials of the metadata log (KIP-554: KRaft brokers replay UserScramCredentialRecords; replog
# brokers get them here, in full with every full UpdateMetadata): the brokers' SASL SCRAM checks logins with them.
_TAG_SCRAM_CREDENTIALS = 10_003
# And the cluster's ACL bindings (tag 10_002), which every broker's authorizer decides on, as KRaft brokers
# read AccessControlEntryRecords from the metadata log.
_TAG_ACLS = 10_002


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
    configs: dict[str, str] = field(default_factory=dict)  # tagged field TAG_TOPIC_CONFIGS


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
    acls: list[AclTuple] = field(default_factory=list)  # tagged: _TAG_ACLS


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
        w.tagged_fields({TAG_TOPIC_CONFIGS: encode_configs(topic.configs)} if topic.configs else {})
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
    if request.acls:
        tags[_TAG_ACLS] = encode_acls(request.acls)
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
        configs = r.tagged_fields().get(TAG_TOPIC_CONFIGS)
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
    acls: list[AclTuple] = []
    for tag, value in r.tagged_fields().items():
        if tag == _TAG_UPDATE_METADATA_TYPE:
            if len(value) != 1:
                raise DecodeError(f"UpdateMetadata Type tag of {len(value)} bytes, expected 1")
            type_ = Reader(value).int8()
        elif tag == _TAG_BROKER_CONFIGS:
            broker_configs = decode_broker_configs(value)
        elif tag == _TAG_ACLS:
            acls = decode_acls(value)
        elif tag == _TAG_SCRAM_CREDENTIALS:
            scram_credentials = decode_scram_credentials(value)
        # other tags are from a newer sender; ignoring them is what tagged fields are for
    expect_end(r, "UpdateMetadataRequest")
    return UpdateMetadataRequest(controller_id, controller_epoch, broker_epoch, topic_states, live_brokers,
                                 type_, is_kraft_controller, broker_configs,
                                 scram_credentials=scram_credentials, acls=acls)


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
