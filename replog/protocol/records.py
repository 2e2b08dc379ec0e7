"""Kafka record batch v2 (magic 2): zero-copy header views, encoder, decoder.

Batch header, big-endian (DefaultRecordBatch.java); offsets are computed from
the field list below rather than hard-coded:

    BaseOffset int64 | Length int32 | PartitionLeaderEpoch int32 | Magic int8 |
    CRC uint32 | Attributes int16 | LastOffsetDelta int32 | BaseTimestamp int64 |
    MaxTimestamp int64 | ProducerId int64 | ProducerEpoch int16 |
    BaseSequence int32 | RecordsCount int32            -> 61 bytes, then records

`Length` counts the bytes after itself. The CRC-32C covers Attributes..end,
so BaseOffset and PartitionLeaderEpoch can be stamped in place by the broker.

Error choice: bad CRC, bad length, truncation, undecodable records and a wrong
magic byte are all CorruptRecordError (CORRUPT_MESSAGE), with wrong magic as
the subclass UnsupportedMagicError so callers can tell it apart. Semantically
invalid but well-formed batches (e.g. lastOffsetDelta not matching the record
count) are InvalidRecordError (INVALID_RECORD).
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from crc32c import crc32c
from kio.schema.errors import ErrorCode

from replog.protocol.compression import Compression, CompressionError, compress, decompress

__all__ = [
    "Compression",
    "CorruptRecordError",
    "InvalidRecordError",
    "UnsupportedMagicError",
    "BatchHeader",
    "RecordBatch",
    "Record",
    "TimestampType",
    "iter_batches",
    "parse_header",
    "build_batch",
    "decode_records",
    "encode_record",
    "encode_varint",
    "decode_varint",
    "increment_sequence",
]

MAGIC_V2 = 2
LOG_OVERHEAD = 12  # BaseOffset + Length: the part of a batch not counted by Length
NO_PARTITION_LEADER_EPOCH = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
INT32_MAX = (1 << 31) - 1

# (field name, struct code) in wire order; offsets below are derived from it.
_HEADER_FIELDS = (
    ("base_offset", "q"),
    ("length", "i"),
    ("partition_leader_epoch", "i"),
    ("magic", "b"),
    ("crc", "I"),
    ("attributes", "h"),
    ("last_offset_delta", "i"),
    ("base_timestamp", "q"),
    ("max_timestamp", "q"),
    ("producer_id", "q"),
    ("producer_epoch", "h"),
    ("base_sequence", "i"),
    ("records_count", "i"),
)


def _field_offset(name: str) -> int:
    codes = ""
    for field, code in _HEADER_FIELDS:
        if field == name:
            return struct.calcsize(">" + codes)
        codes += code
    raise KeyError(name)


HEADER = struct.Struct(">" + "".join(code for _, code in _HEADER_FIELDS))
RECORD_BATCH_OVERHEAD = HEADER.size
BASE_OFFSET_OFFSET = _field_offset("base_offset")
LENGTH_OFFSET = _field_offset("length")
PARTITION_LEADER_EPOCH_OFFSET = _field_offset("partition_leader_epoch")
MAGIC_OFFSET = _field_offset("magic")
CRC_OFFSET = _field_offset("crc")
ATTRIBUTES_OFFSET = _field_offset("attributes")
assert RECORD_BATCH_OVERHEAD == 61
assert LOG_OVERHEAD == LENGTH_OFFSET + 4
assert ATTRIBUTES_OFFSET == 21

# Smallest legal value of the Length field: a header with zero records.
MIN_LENGTH_FIELD = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD

_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT8 = struct.Struct(">b")

# Attributes bits.
_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20

_KNOWN_CODECS = frozenset(int(codec) for codec in Compression)


def _compression_of(attributes: int) -> Compression:
    """The codec in a batch's attributes; ids 5-7 are unassigned (Kafka's CompressionType.forId throws)."""
    codec = attributes & _COMPRESSION_MASK
    if codec not in _KNOWN_CODECS:
        raise CorruptRecordError(f"unknown compression codec {codec}")
    return Compression(codec)


_MAX_VARINT_BYTES = 10  # a zig-zag int64 needs at most ceil(64 / 7) bytes


class CorruptRecordError(Exception):
    error_code = ErrorCode.corrupt_message


class UnsupportedMagicError(CorruptRecordError):
    """The magic byte is not 2; replog stores and serves only v2 batches."""


class InvalidRecordError(Exception):
    error_code = ErrorCode.invalid_record


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: wraps past INT32_MAX to 0."""
    assert sequence >= 0
    assert increment >= 0
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


class BatchHeader(NamedTuple):
    """The 61 header bytes of one batch, decoded; enough to index and route it."""

    base_offset: int
    length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_in_bytes(self) -> int:
        return LOG_OVERHEAD + self.length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        return _compression_of(self.attributes)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType(1 if self.attributes & _TIMESTAMP_TYPE_BIT else 0)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)


def parse_header(buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Decode the header at `position`; checks magic and the Length floor."""
    assert len(buf) - position >= RECORD_BATCH_OVERHEAD
    header = BatchHeader._make(HEADER.unpack_from(buf, position))
    if header.length < MIN_LENGTH_FIELD:
        raise CorruptRecordError(f"batch length field {header.length} < {MIN_LENGTH_FIELD}")
    if header.magic != MAGIC_V2:
        raise UnsupportedMagicError(f"unsupported magic {header.magic} (only 2 is supported)")
    return header


def _delegate(name: str) -> property:
    return property(lambda self: getattr(self.header, name), doc=f"Header field {name}.")


class RecordBatch:
    """A view over exactly one batch held in a memoryview; nothing is copied.

    `stamp` writes into the buffer, so it needs a writable one (bytearray, mmap).
    """

    __slots__ = ("buffer", "header")

    def __init__(self, buffer: memoryview) -> None:
        header = parse_header(buffer)
        if header.size_in_bytes != len(buffer):
            raise CorruptRecordError(f"batch size {header.size_in_bytes} != buffer size {len(buffer)}")
        self.buffer = buffer
        self.header = header

    base_offset = _delegate("base_offset")
    length = _delegate("length")
    partition_leader_epoch = _delegate("partition_leader_epoch")
    magic = _delegate("magic")
    crc = _delegate("crc")
    attributes = _delegate("attributes")
    last_offset_delta = _delegate("last_offset_delta")
    base_timestamp = _delegate("base_timestamp")
    max_timestamp = _delegate("max_timestamp")
    producer_id = _delegate("producer_id")
    producer_epoch = _delegate("producer_epoch")
    base_sequence = _delegate("base_sequence")
    records_count = _delegate("records_count")
    size_in_bytes = _delegate("size_in_bytes")
    last_offset = _delegate("last_offset")
    next_offset = _delegate("next_offset")
    compression = _delegate("compression")
    timestamp_type = _delegate("timestamp_type")
    is_transactional = _delegate("is_transactional")
    is_control = _delegate("is_control")
    last_sequence = _delegate("last_sequence")

    def compute_crc(self) -> int:
        return crc32c(self.buffer[ATTRIBUTES_OFFSET:])

    def is_crc_valid(self) -> bool:
        return self.compute_crc() == self.header.crc

    def ensure_valid(self) -> None:
        """CRC, then the codec id: a leader must not store a batch no consumer can decompress (Kafka's
        LogValidator reads the codec of every batch it appends)."""
        computed = self.compute_crc()
        if computed != self.header.crc:
            raise CorruptRecordError(
                f"batch at offset {self.header.base_offset}: stored crc {self.header.crc} != computed {computed}"
            )
        _compression_of(self.header.attributes)

    def stamp(self, *, base_offset: int, partition_leader_epoch: int) -> None:
        """Assign offsets and leader epoch in place; both lie outside the CRC."""
        assert base_offset >= 0
        assert partition_leader_epoch >= NO_PARTITION_LEADER_EPOCH
        _INT64.pack_into(self.buffer, BASE_OFFSET_OFFSET, base_offset)
        _INT32.pack_into(self.buffer, PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)
        self.header = self.header._replace(
            base_offset=base_offset, partition_leader_epoch=partition_leader_epoch
        )

    def __repr__(self) -> str:
        h = self.header
        return (
            f"RecordBatch(base_offset={h.base_offset}, last_offset={h.last_offset}, size={h.size_in_bytes})"
        )


def iter_batches(
    buf: bytes | bytearray | memoryview, *, allow_partial_tail: bool = False
) -> Iterator[RecordBatch]:
    """Walk concatenated batches; every bound is checked before slicing.

    With allow_partial_tail an incomplete last batch ends the walk silently
    (a fetch response may cut one); otherwise it is a CorruptRecordError.
    """
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    pos = 0
    end = len(view)
    while pos < end:
        remaining = end - pos
        if remaining < LOG_OVERHEAD:
            if allow_partial_tail:
                return
            raise CorruptRecordError(f"{remaining} trailing bytes at position {pos}")
        (length,) = _INT32.unpack_from(view, pos + LENGTH_OFFSET)
        if length < MIN_LENGTH_FIELD:
            raise CorruptRecordError(f"batch length field {length} at position {pos} < {MIN_LENGTH_FIELD}")
        size = LOG_OVERHEAD + length
        if size > remaining:
            if allow_partial_tail:
                return
            raise CorruptRecordError(f"batch at position {pos} needs {size} bytes, {remaining} remain")
        yield RecordBatch(view[pos : pos + size])
        pos += size
    assert pos == end


@dataclass(slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def encode_varint(value: int, out: bytearray) -> None:
    """Append a zig-zag varint (int32 and int64 encode identically in range)."""
    assert -(1 << 63) <= value < (1 << 63)
    unsigned = (value << 1) ^ (value >> 63)
    assert unsigned >= 0
    while unsigned >= 0x80:
        out.append((unsigned & 0x7F) | 0x80)
        unsigned >>= 7
    out.append(unsigned)


def decode_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varint at `pos`; returns (value, position after it)."""
    unsigned = 0
    shift = 0
    for i in range(_MAX_VARINT_BYTES):
        if pos + i >= len(buf):
            raise CorruptRecordError("varint runs past the end of the buffer")
        byte = buf[pos + i]
        unsigned |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (unsigned >> 1) ^ -(unsigned & 1), pos + i + 1
        shift += 7
    raise CorruptRecordError(f"varint longer than {_MAX_VARINT_BYTES} bytes")


def _encode_bytes(data: bytes | None, out: bytearray) -> None:
    if data is None:
        encode_varint(-1, out)
        return
    encode_varint(len(data), out)
    out += data


def encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]],
) -> None:
    body = bytearray(1)  # attributes int8, unused and zero
    encode_varint(timestamp_delta, body)
    encode_varint(offset_delta, body)
    _encode_bytes(key, body)
    _encode_bytes(value, body)
    encode_varint(len(headers), body)
    for header_key, header_value in headers:
        _encode_bytes(header_key.encode(), body)
        _encode_bytes(header_value, body)
    encode_varint(len(body), out)
    out += body


def build_batch(
    records: Sequence[tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]], int]],
    *,
    compression: Compression = Compression.NONE,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
) -> bytes:
    """Encode (key, value, headers, timestamp_ms) tuples as one v2 batch."""
    assert len(records) > 0
    assert len(records) <= INT32_MAX
    base_timestamp = records[0][3]
    encoded = bytearray()
    for offset_delta, (key, value, headers, timestamp) in enumerate(records):
        encode_record(encoded, offset_delta, timestamp - base_timestamp, key, value, headers)
    payload = encoded if compression == Compression.NONE else compress(compression, encoded)
    attributes = int(compression) | (_TRANSACTIONAL_BIT if is_transactional else 0)
    size = RECORD_BATCH_OVERHEAD + len(payload)
    out = bytearray(size)
    HEADER.pack_into(
        out, 0, base_offset, size - LOG_OVERHEAD, partition_leader_epoch, MAGIC_V2, 0, attributes,
        len(records) - 1, base_timestamp, max(r[3] for r in records), producer_id, producer_epoch,
        base_sequence, len(records),
    )  # fmt: skip
    out[RECORD_BATCH_OVERHEAD:] = payload
    _UINT32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    assert RecordBatch(memoryview(out)).is_crc_valid()
    return bytes(out)


def decode_records(batch: RecordBatch) -> list[Record]:
    """Decode every record of a batch, decompressing if needed.

    Control batches (transaction markers) carry no user data; they decode to [].
    """
    header = batch.header
    if header.is_control:
        return []
    body = batch.buffer[RECORD_BATCH_OVERHEAD:]
    if header.compression != Compression.NONE:
        try:
            body = decompress(header.compression, body)
        except CompressionError as exc:
            raise CorruptRecordError(str(exc)) from exc
    if header.records_count < 0 or header.records_count > len(body):
        raise CorruptRecordError(f"records count {header.records_count} impossible for {len(body)} bytes")
    log_append_time = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    records = []
    pos = 0
    for _ in range(header.records_count):
        record, pos = _decode_record(body, pos, header)
        if log_append_time:
            record.timestamp = header.max_timestamp
        records.append(record)
    if pos != len(body):
        raise CorruptRecordError(f"{len(body) - pos} bytes left after {header.records_count} records")
    return records


def _decode_bytes(buf: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    length, pos = decode_varint(buf, pos)
    if length < 0:
        return None, pos
    if pos + length > end:
        raise CorruptRecordError("record field runs past the end of the record")
    return bytes(buf[pos : pos + length]), pos + length


def _decode_record(buf: memoryview, pos: int, header: BatchHeader) -> tuple[Record, int]:
    length, pos = decode_varint(buf, pos)
    end = pos + length
    if length < 1 or end > len(buf):
        raise CorruptRecordError(f"record length {length} runs past the batch")
    pos += 1  # attributes
    timestamp_delta, pos = decode_varint(buf, pos)
    offset_delta, pos = decode_varint(buf, pos)
    key, pos = _decode_bytes(buf, pos, end)
    value, pos = _decode_bytes(buf, pos, end)
    header_count, pos = decode_varint(buf, pos)
    if header_count < 0 or header_count > end - pos:
        raise CorruptRecordError(f"record header count {header_count} is impossible")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(header_count):
        header_key, pos = _decode_bytes(buf, pos, end)
        header_value, pos = _decode_bytes(buf, pos, end)
        if header_key is None:
            raise CorruptRecordError("record header key is null")
        headers.append((header_key.decode(errors="replace"), header_value))
    if pos != end:
        raise CorruptRecordError(f"record length {length} does not match its fields")
    record = Record(
        header.base_offset + offset_delta, header.base_timestamp + timestamp_delta, key, value, headers
    )
    return record, end
