"""LeaderAndIsr v7 (key 4) and its response: the controller tells a partition's replicas who leads, in which
epoch, and the ISR (see control.py for how these hand-written codecs are written and bounded)."""

import uuid
from dataclasses import dataclass, field

from .control_fields import (
    TAG_TOPIC_CONFIGS,
    Buffer,
    decode_configs,
    encode_configs,
    expect_end,
    read_count,
    read_int32s,
    write_int32s,
)
from .primitives import Reader, Writer

LEADER_AND_ISR_VERSION = 7
LEADER_DURING_DELETE = -2  # Kafka's LeaderAndIsr.LeaderDuringDelete: the partition is being deleted


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
    configs: dict[str, str] = field(default_factory=dict)  # tagged field TAG_TOPIC_CONFIGS


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
        w.tagged_fields({TAG_TOPIC_CONFIGS: encode_configs(topic.configs)} if topic.configs else {})
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
        configs = r.tagged_fields().get(TAG_TOPIC_CONFIGS)
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
