"""StopReplica v4 (key 5) and its response: the controller tells a replica to stop, and maybe to delete its
log (see control.py)."""

from dataclasses import dataclass

from .control_fields import (
    Buffer,
    expect_end,
    read_count,
)
from .primitives import Reader, Writer

STOP_REPLICA_VERSION = 4


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
