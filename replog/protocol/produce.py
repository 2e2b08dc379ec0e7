"""Hand-written ProduceRequest codec (v3-10; v10 only adds response fields): record data stays a writable memoryview into the frame, so the
broker validates and stamps batches in place and appends them without a copy. kio would hand back
immutable bytes copies (see benchmarks/codec_kio_vs_handwritten.py for the measured difference).

The usual ProduceResponse is hand-written too: the leader sends one per produce request, and kio's build
and serialise took ~25-55 us each where this takes a few (docs/profiles/rf3-throughput.md). An answer that
carries KIP-951's leader hints (v10 tagged fields) is rare and stays with kio."""

import struct
from dataclasses import dataclass, field

from .apis import SUPPORTED_APIS, ApiKey
from .primitives import MAX_VARINT_BYTES, DecodeError, Reader, Writer, uvarint_bytes

_PRODUCE = SUPPORTED_APIS[ApiKey.PRODUCE]
# Per partition: index, error code, base offset, log append time (v2+), log start offset (v5+).
_PARTITION_V3 = struct.Struct(">ihqq")
_PARTITION_V5 = struct.Struct(">ihqqq")
_THROTTLE_TIME = struct.Struct(">i")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_ACKS_TIMEOUT_COUNT = struct.Struct(">hii")  # v3-8: acks, timeout, the topic count
_INDEX_LENGTH = struct.Struct(">ii")  # v3-8: a partition's index and its records' length


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
    """Every produce request passes here: read with struct calls and inline bounds checks rather than a Reader
    method per field (a request of one partition took 3.3-5.1 us through the Reader, 2.2-3.2 through this;
    tests/unit/test_produce_request_decoding.py holds it field for field to kio's decoding)."""
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    if _PRODUCE.is_flexible(version):
        return _decode_flexible(view, offset)
    return _decode_classic(view, offset)


def _decode_classic(view: memoryview, pos: int) -> ProduceRequestData:
    """v3-8: int16-length strings, int32-length arrays and bytes."""
    size = len(view)
    transactional_id, pos = _int16_string(view, pos, size, nullable=True)
    if pos + _ACKS_TIMEOUT_COUNT.size > size:
        raise DecodeError(f"need {_ACKS_TIMEOUT_COUNT.size} bytes at {pos}, have {size - pos}")
    acks, timeout_ms, topic_count = _ACKS_TIMEOUT_COUNT.unpack_from(view, pos)
    pos += _ACKS_TIMEOUT_COUNT.size
    topic_count = _bounded_count(topic_count, size - pos)
    topics = []
    for _ in range(topic_count):
        name, pos = _int16_string(view, pos, size, nullable=False)
        if pos + 4 > size:
            raise DecodeError(f"need 4 bytes at {pos}, have {size - pos}")
        partition_count = _bounded_count(_I32.unpack_from(view, pos)[0], size - pos - 4)
        pos += 4
        partitions = []
        for _ in range(partition_count):
            if pos + _INDEX_LENGTH.size > size:
                raise DecodeError(f"need {_INDEX_LENGTH.size} bytes at {pos}, have {size - pos}")
            index, length = _INDEX_LENGTH.unpack_from(view, pos)
            pos += _INDEX_LENGTH.size
            records, pos = _bytes_field(view, pos, size, length)
            partitions.append(ProducePartitionData(index, records))
        topics.append(ProduceTopicData(name, partitions))
    # Bytes after the body are ignored, as Kafka's request parsing ignores them (see messages.decode_request).
    return ProduceRequestData(transactional_id, acks, timeout_ms, topics)


def _decode_flexible(view: memoryview, pos: int) -> ProduceRequestData:
    """v9+: compact (unsigned varint + 1) lengths and a tagged field section after each structure."""
    size = len(view)
    transactional_id, pos = _compact_string(view, pos, size, nullable=True)
    if pos + _ACKS_TIMEOUT.size > size:
        raise DecodeError(f"need {_ACKS_TIMEOUT.size} bytes at {pos}, have {size - pos}")
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(view, pos)
    pos += _ACKS_TIMEOUT.size
    topic_count, pos = _uvarint(view, pos, size)
    topic_count = _bounded_count(topic_count - 1, size - pos)
    topics = []
    for _ in range(topic_count):
        name, pos = _compact_string(view, pos, size, nullable=False)
        partition_count, pos = _uvarint(view, pos, size)
        partition_count = _bounded_count(partition_count - 1, size - pos)
        partitions = []
        for _ in range(partition_count):
            if pos + 4 > size:
                raise DecodeError(f"need 4 bytes at {pos}, have {size - pos}")
            index = _I32.unpack_from(view, pos)[0]
            length, pos = _uvarint(view, pos + 4, size)
            records, pos = _bytes_field(view, pos, size, length - 1)
            pos = _skip_tagged_fields(view, pos, size)
            partitions.append(ProducePartitionData(index, records))
        pos = _skip_tagged_fields(view, pos, size)
        topics.append(ProduceTopicData(name, partitions))
    _skip_tagged_fields(view, pos, size)
    return ProduceRequestData(transactional_id, acks, timeout_ms, topics)


def _bounded_count(count: int, remaining: int) -> int:
    """An array's element count; each element takes at least one byte, so no count exceeds the bytes left.
    Neither of ProduceRequest's arrays (TopicData, PartitionData) is nullable: a null one (-1) is refused, as
    Kafka's generated ProduceRequestData.read refuses it ("non-nullable field ... was serialized as null")."""
    if count < 0:
        raise DecodeError("null array, not nullable" if count == -1 else f"negative array length {count}")
    if count > remaining:
        raise DecodeError(f"array of {count} elements cannot fit in {remaining} bytes")
    return count


def _bytes_field(view: memoryview, pos: int, size: int, length: int) -> tuple[memoryview | None, int]:
    if length == -1:
        return None, pos
    if length < -1:
        raise DecodeError(f"negative length {length}")
    end = pos + length
    if end > size:
        raise DecodeError(f"need {length} bytes at {pos}, have {size - pos}")
    return view[pos:end], end


def _int16_string(view: memoryview, pos: int, size: int, *, nullable: bool) -> tuple[str | None, int]:
    if pos + 2 > size:
        raise DecodeError(f"need 2 bytes at {pos}, have {size - pos}")
    return _string(view, pos + 2, size, _I16.unpack_from(view, pos)[0], nullable)


def _compact_string(view: memoryview, pos: int, size: int, *, nullable: bool) -> tuple[str | None, int]:
    length, pos = _uvarint(view, pos, size)
    return _string(view, pos, size, length - 1, nullable)


def _string(view: memoryview, pos: int, size: int, length: int, nullable: bool) -> tuple[str | None, int]:
    data, pos = _bytes_field(view, pos, size, length)
    if data is None:
        if not nullable:
            raise DecodeError("null where a string is required")
        return None, pos
    try:
        return str(data, "utf-8"), pos
    except UnicodeDecodeError as e:
        raise DecodeError("invalid UTF-8 in a string") from e


def _uvarint(view: memoryview, pos: int, size: int) -> tuple[int, int]:
    value = 0
    for shift in range(0, 7 * MAX_VARINT_BYTES, 7):
        if pos >= size:
            raise DecodeError(f"need 1 bytes at {pos}, have 0")
        byte = view[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
    raise DecodeError(f"unsigned varint longer than {MAX_VARINT_BYTES} bytes")


def _skip_tagged_fields(view: memoryview, pos: int, size: int) -> int:
    if pos < size and view[pos] == 0:
        return pos + 1  # none, as every client sends
    reader = Reader(view, pos)
    reader.skip_tagged_fields()
    return reader.pos


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
    errors (v8+) and no tagged fields: the same bytes kio writes for such an answer. Every acks=1 and
    acks=all request is answered through here, so it appends to one bytearray with no Writer call per field."""
    assert _PRODUCE.supports(version)
    flexible = _PRODUCE.is_flexible(version)
    partition_fields = _PARTITION_V5 if version >= 5 else _PARTITION_V3
    out = bytearray(_array_length(len(responses), flexible))
    for name, partitions in responses.items():
        out += _string_bytes(name, flexible)
        out += _array_length(len(partitions), flexible)
        for p in partitions:
            if version >= 5:
                out += partition_fields.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms,
                                             p.log_start_offset)
            else:
                out += partition_fields.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms)
            if version >= 8:
                out += _array_length(0, flexible)  # record_errors: replog refuses a batch whole
                out += _string_bytes(p.error_message, flexible)
            if flexible:
                out.append(0)  # no tagged fields
        if flexible:
            out.append(0)
    out += _THROTTLE_TIME.pack(throttle_time_ms)
    if flexible:
        out.append(0)
    return bytes(out)


def _array_length(n: int, flexible: bool) -> bytes:
    return uvarint_bytes(n + 1) if flexible else _I32.pack(n)


def _string_bytes(value: str | None, flexible: bool) -> bytes:
    """A (nullable) string with its length: compact (unsigned varint of length + 1) or int16."""
    if value is None:
        return b"\x00" if flexible else b"\xff\xff"
    data = value.encode()
    return (uvarint_bytes(len(data) + 1) if flexible else _I16.pack(len(data))) + data
