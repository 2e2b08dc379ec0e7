"""Hand-written FetchResponse codec (v4-12).

The broker encodes a response as a list of parts: small bytes objects for the fields and, for each
partition's records, the log's file slice itself, so the connection can send it with os.sendfile.
The client and the replica fetcher decode responses with record data left as memoryviews.
"""

from dataclasses import dataclass, field
from typing import Protocol

from .apis import SUPPORTED_APIS, ApiKey
from .primitives import DecodeError, Reader, Writer

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
    w = Writer()
    w.int32(response.throttle_time_ms)
    if version >= 7:
        w.int16(response.error_code)
        w.int32(response.session_id)
    w.array_length(len(response.topics), compact=flexible)
    for topic in response.topics:
        w.string(topic.topic, compact=flexible)
        w.array_length(len(topic.partitions), compact=flexible)
        for p in topic.partitions:
            _write_partition_fields(w, version, p)
            records = p.records
            w.bytes_length(None if records is None else part_length(records), compact=flexible)
            if records is not None and part_length(records):
                parts.append(bytes(w.buf))
                parts.append(records)
                w = Writer()
            if flexible:
                w.tagged_fields(_partition_tags(p))
        if flexible:
            w.empty_tagged_fields()
    if flexible:
        w.empty_tagged_fields()
    parts.append(bytes(w.buf))
    return parts


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
