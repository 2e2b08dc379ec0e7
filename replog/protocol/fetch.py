"""Hand-written FetchResponse codec (v4-12).

The broker encodes a response as a list of parts: small bytes objects for the fields and, for each
partition's records, the log's file slice itself, so the connection can send it with os.sendfile.
The client and the replica fetcher decode responses with record data left as memoryviews.
"""

import functools
import struct
from dataclasses import dataclass, field
from typing import Protocol

from .apis import SUPPORTED_APIS, ApiKey
from .primitives import DecodeError, Reader, Writer, uvarint_bytes

_FETCH = SUPPORTED_APIS[ApiKey.FETCH]

TAG_DIVERGING_EPOCH = 0
TAG_CURRENT_LEADER = 1


class SliceLike(Protocol):
    """A (file, position, length) range of a log segment, sent without copying through user space."""

    file: object  # the segment's open file; anything with fileno()
    position: int
    length: int


RecordsPart = bytes | memoryview | SliceLike


def part_length(part: RecordsPart) -> int:
    return len(part) if isinstance(part, (bytes, bytearray, memoryview)) else part.length


@dataclass(slots=True)
class FetchPartitionResult:
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: RecordsPart | None = None
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end_offset), v12+
    current_leader: tuple[int, int] | None = None  # (leader_id, leader_epoch), v12+
    aborted_transactions: list[tuple[int, int]] | None = None
    preferred_read_replica: int = -1


@dataclass(slots=True)
class FetchTopicResult:
    topic: str
    partitions: list[FetchPartitionResult] = field(default_factory=list)


@dataclass(slots=True)
class FetchResponseData:
    topics: list[FetchTopicResult]
    throttle_time_ms: int = 0
    error_code: int = 0
    session_id: int = 0


def encode_fetch_response(version: int, response: FetchResponseData) -> list[RecordsPart]:
    assert _FETCH.supports(version)
    flexible = _FETCH.is_flexible(version)
    parts: list[RecordsPart] = []
    if version >= 7:
        buf = bytearray(_HEAD_V7.pack(response.throttle_time_ms, response.error_code, response.session_id))
    else:
        buf = bytearray(_I32.pack(response.throttle_time_ms))
    buf += _array_length(len(response.topics), flexible)
    for topic in response.topics:
        buf += _topic_name(topic.topic, flexible)
        buf += _array_length(len(topic.partitions), flexible)
        for p in topic.partitions:
            records = p.records
            length = None if records is None else part_length(records)
            if p.aborted_transactions is None:
                buf += _partition_head(version, p, length)
            else:
                w = Writer()
                _write_partition_fields(w, version, p)
                w.bytes_length(length, compact=flexible)
                buf += w.buf
            if length:
                parts.append(bytes(buf))
                parts.append(records)
                buf = bytearray()
            if flexible:
                if p.diverging_epoch is None and p.current_leader is None:
                    buf.append(0)  # no tagged fields
                else:
                    w = Writer()
                    w.tagged_fields(_partition_tags(p))
                    buf += w.buf
        if flexible:
            buf.append(0)
    if flexible:
        buf.append(0)
    parts.append(bytes(buf))
    return parts


# A partition's fields up to its records' length, when it has no aborted transactions (the null array), in
# one pack: the field-by-field Writer took some fifteen calls per partition of every fetch answer.
_HEAD_V7 = struct.Struct(">ihi")  # throttle time, error code, session id
_I32 = struct.Struct(">i")
_HEAD_V4 = struct.Struct(">ihqqii")  # index, error, HW, LSO, aborted (null: -1), records length
_HEAD_V5 = struct.Struct(">ihqqqii")  # ... and the log start offset (v5+) before the aborted array
_HEAD_V11 = struct.Struct(">ihqqqiii")  # ... and the preferred read replica (v11+) after it
_HEAD_V12 = struct.Struct(">ihqqqBi")  # flexible: a compact null array (0), the records' length a varint after


def _partition_head(version: int, p: FetchPartitionResult, length: int | None) -> bytes:
    if version >= 12:
        return _HEAD_V12.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                              p.log_start_offset, 0, p.preferred_read_replica
                              ) + uvarint_bytes(0 if length is None else length + 1)
    size = -1 if length is None else length
    if version >= 11:
        return _HEAD_V11.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                              p.log_start_offset, -1, p.preferred_read_replica, size)
    if version >= 5:
        return _HEAD_V5.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                             p.log_start_offset, -1, size)
    return _HEAD_V4.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset, -1, size)


def _array_length(n: int, flexible: bool) -> bytes:
    return uvarint_bytes(n + 1) if flexible else _I32.pack(n)


@functools.lru_cache(maxsize=4096)
def _topic_name(name: str, flexible: bool) -> bytes:
    """A topic name as encoded in every answer that names it: the broker's topics, so the cache stays small."""
    w = Writer()
    w.string(name, compact=flexible)
    return bytes(w.buf)


def _write_partition_fields(w: Writer, version: int, p: FetchPartitionResult) -> None:
    flexible = _FETCH.is_flexible(version)
    w.int32(p.partition_index)
    w.int16(p.error_code)
    w.int64(p.high_watermark)
    w.int64(p.last_stable_offset)
    if version >= 5:
        w.int64(p.log_start_offset)
    aborted = p.aborted_transactions
    if aborted is None:
        w.array_length(-1, compact=flexible)
    else:
        w.array_length(len(aborted), compact=flexible)
        for producer_id, first_offset in aborted:
            w.int64(producer_id)
            w.int64(first_offset)
            if flexible:
                w.empty_tagged_fields()
    if version >= 11:
        w.int32(p.preferred_read_replica)


def _partition_tags(p: FetchPartitionResult) -> dict[int, bytes]:
    """Only non-default tagged fields are written (old librdkafka cannot skip unknown ones)."""
    tags = {}
    if p.diverging_epoch is not None:
        t = Writer()
        t.int32(p.diverging_epoch[0])
        t.int64(p.diverging_epoch[1])
        t.empty_tagged_fields()
        tags[TAG_DIVERGING_EPOCH] = bytes(t.buf)
    if p.current_leader is not None:
        t = Writer()
        t.int32(p.current_leader[0])
        t.int32(p.current_leader[1])
        t.empty_tagged_fields()
        tags[TAG_CURRENT_LEADER] = bytes(t.buf)
    return tags


def decode_fetch_response(version: int, frame: bytearray | memoryview, offset: int) -> FetchResponseData:
    flexible = _FETCH.is_flexible(version)
    r = Reader(frame, offset)
    response = FetchResponseData(topics=[], throttle_time_ms=r.int32())
    if version >= 7:
        response.error_code = r.int16()
        response.session_id = r.int32()
    for _ in range(max(0, r.array_length(compact=flexible))):
        topic = FetchTopicResult(r.string(compact=flexible))
        for _ in range(max(0, r.array_length(compact=flexible))):
            topic.partitions.append(_read_partition(r, version))
        if flexible:
            r.skip_tagged_fields()
        response.topics.append(topic)
    if flexible:
        r.skip_tagged_fields()
    if r.remaining:
        raise DecodeError(f"{r.remaining} trailing bytes after FetchResponse")
    return response


def _read_partition(r: Reader, version: int) -> FetchPartitionResult:
    flexible = _FETCH.is_flexible(version)
    p = FetchPartitionResult(r.int32(), r.int16(), r.int64(), r.int64())
    if version >= 5:
        p.log_start_offset = r.int64()
    count = r.array_length(compact=flexible)
    if count >= 0:
        p.aborted_transactions = []
        for _ in range(count):
            p.aborted_transactions.append((r.int64(), r.int64()))
            if flexible:
                r.skip_tagged_fields()
    if version >= 11:
        p.preferred_read_replica = r.int32()
    p.records = r.nullable_bytes(compact=flexible)
    if flexible:
        for tag, value in r.tagged_fields().items():
            sub = Reader(value)
            if tag == TAG_DIVERGING_EPOCH:
                p.diverging_epoch = (sub.int32(), sub.int64())
            elif tag == TAG_CURRENT_LEADER:
                p.current_leader = (sub.int32(), sub.int32())
    return p
