"""Hand-written ProduceRequest codec (v3-10; v10 only adds response fields): record data stays a writable memoryview into the frame, so the
broker validates and stamps batches in place and appends them without a copy. kio would hand back
immutable bytes copies (see benchmarks/codec_kio_vs_handwritten.py for the measured difference).

The usual ProduceResponse is hand-written too: the leader sends one per produce request, and kio's build
and serialise took ~25-55 us each where this takes a few (docs/profiles/rf3-throughput.md). An answer that
carries KIP-951's leader hints (v10 tagged fields) is rare and stays with kio."""

import struct
from dataclasses import dataclass, field

from .apis import SUPPORTED_APIS, ApiKey
from .primitives import Reader, Writer

_PRODUCE = SUPPORTED_APIS[ApiKey.PRODUCE]
# Per partition: index, error code, base offset, log append time (v2+), log start offset (v5+).
_PARTITION_V3 = struct.Struct(">ihqq")
_PARTITION_V5 = struct.Struct(">ihqqq")
_THROTTLE_TIME = struct.Struct(">i")


@dataclass(slots=True)
class ProducePartitionData:
    index: int
    records: memoryview | None


@dataclass(slots=True)
class ProduceTopicData:
    name: str
    partitions: list[ProducePartitionData] = field(default_factory=list)


@dataclass(slots=True)
class ProduceRequestData:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topics: list[ProduceTopicData]


def decode_produce_request(version: int, frame: bytearray | memoryview, offset: int) -> ProduceRequestData:
    flexible = _PRODUCE.is_flexible(version)
    r = Reader(frame, offset)
    transactional_id = r.nullable_string(compact=flexible)
    acks = r.int16()
    timeout_ms = r.int32()
    topics = []
    for _ in range(max(0, r.array_length(compact=flexible))):
        topic = ProduceTopicData(r.string(compact=flexible))
        for _ in range(max(0, r.array_length(compact=flexible))):
            index = r.int32()
            records = r.nullable_bytes(compact=flexible)
            if flexible:
                r.skip_tagged_fields()
            topic.partitions.append(ProducePartitionData(index, records))
        if flexible:
            r.skip_tagged_fields()
        topics.append(topic)
    if flexible:
        r.skip_tagged_fields()
    # Bytes after the body are ignored, as Kafka's request parsing ignores them (see messages.decode_request).
    return ProduceRequestData(transactional_id, acks, timeout_ms, topics)


def encode_produce_request(version: int, request: ProduceRequestData) -> list[bytes | memoryview]:
    """Parts to write in order; record data is passed through without copying."""
    flexible = _PRODUCE.is_flexible(version)
    parts: list[bytes | memoryview] = []
    w = Writer()
    w.string(request.transactional_id, compact=flexible)
    w.int16(request.acks)
    w.int32(request.timeout_ms)
    w.array_length(len(request.topics), compact=flexible)
    for topic in request.topics:
        w.string(topic.name, compact=flexible)
        w.array_length(len(topic.partitions), compact=flexible)
        for partition in topic.partitions:
            w.int32(partition.index)
            records = partition.records
            w.bytes_length(None if records is None else len(records), compact=flexible)
            if records:
                parts.append(bytes(w.buf))
                parts.append(records)
                w = Writer()
            if flexible:
                w.empty_tagged_fields()
        if flexible:
            w.empty_tagged_fields()
    if flexible:
        w.empty_tagged_fields()
    parts.append(bytes(w.buf))
    return parts


@dataclass(slots=True)
class ProducePartitionResponse:
    index: int
    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1  # -1: the topic uses CreateTime
    log_start_offset: int = -1
    error_message: str | None = None  # v8+


def encode_produce_response(version: int, responses: dict[str, list[ProducePartitionResponse]],
                            throttle_time_ms: int = 0) -> bytes:
    """The ProduceResponse body (no header) as Kafka's ProduceResponse.json lays it out, with no record
    errors (v8+) and no tagged fields: the same bytes kio writes for such an answer."""
    assert _PRODUCE.supports(version)
    flexible = _PRODUCE.is_flexible(version)
    w = Writer()
    w.array_length(len(responses), compact=flexible)
    for name, partitions in responses.items():
        w.string(name, compact=flexible)
        w.array_length(len(partitions), compact=flexible)
        for p in partitions:
            if version >= 5:
                w.buf += _PARTITION_V5.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms,
                                            p.log_start_offset)
            else:
                w.buf += _PARTITION_V3.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms)
            if version >= 8:
                w.array_length(0, compact=flexible)  # record_errors: replog refuses a batch whole
                w.string(p.error_message, compact=flexible)
            if flexible:
                w.empty_tagged_fields()
        if flexible:
            w.empty_tagged_fields()
    w.buf += _THROTTLE_TIME.pack(throttle_time_ms)
    if flexible:
        w.empty_tagged_fields()
    return bytes(w.buf)
