"""The log cleaner's side of record batch v2: a cheap pass over a batch's keys and the rebuild of a batch
that keeps only some of its records. The batch layout and the full encoder and decoder are in records.py.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

from crc32c import crc32c

from replog.protocol.compression import Compression, CompressionError, compress, decompress
from replog.protocol.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER,
    LOG_OVERHEAD,
    MAGIC_V2,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    Record,
    RecordBatch,
    TimestampType,
    decode_varint,
    encode_record,
)

_UINT32 = struct.Struct(">I")


def rebuild_batch(original: BatchHeader, records: Sequence[Record]) -> bytes:
    """The batch `original` holding only `records` (a subset of its records, as decode_records gave them):
    what the log cleaner writes. As Kafka's MemoryRecords.filterTo does for v2, the base offset and the
    last offset delta stay (so the producer's sequence range and the offsets after it are unchanged), as do
    the producer id, epoch, base sequence, leader epoch and attributes; compressed batches are recompressed
    with their own codec, and the CRC-32C is computed afresh."""
    assert records
    assert original.records_count >= len(records)
    base = original.base_offset
    log_append_time = original.timestamp_type == TimestampType.LOG_APPEND_TIME
    base_timestamp = original.base_timestamp if log_append_time else records[0].timestamp
    encoded = bytearray()
    for record in records:
        assert base <= record.offset <= original.last_offset
        timestamp_delta = 0 if log_append_time else record.timestamp - base_timestamp
        encode_record(encoded, record.offset - base, timestamp_delta, record.key, record.value, record.headers)
    compression = original.compression
    payload = encoded if compression == Compression.NONE else compress(compression, encoded)
    max_timestamp = original.max_timestamp if log_append_time else max(r.timestamp for r in records)
    size = RECORD_BATCH_OVERHEAD + len(payload)
    out = bytearray(size)
    HEADER.pack_into(
        out, 0, base, size - LOG_OVERHEAD, original.partition_leader_epoch, MAGIC_V2, 0, original.attributes,
        original.last_offset_delta, base_timestamp, max_timestamp, original.producer_id,
        original.producer_epoch, original.base_sequence, len(records),
    )  # fmt: skip
    out[RECORD_BATCH_OVERHEAD:] = payload
    _UINT32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def iter_record_keys(batch: RecordBatch) -> Iterator[tuple[int, bytes | None, bool]]:
    """(offset, key, value is null) of each record, decompressing if needed, without decoding values or
    headers: what the log cleaner needs to decide which records stay. Control batches yield nothing."""
    header = batch.header
    if header.is_control:
        return
    body = batch.buffer[RECORD_BATCH_OVERHEAD:]
    if header.compression != Compression.NONE:
        try:
            body = memoryview(decompress(header.compression, body))
        except CompressionError as exc:
            raise CorruptRecordError(str(exc)) from exc
    if header.records_count < 0 or header.records_count > len(body):
        raise CorruptRecordError(f"records count {header.records_count} impossible for {len(body)} bytes")
    data = bytes(body)  # indexing bytes is several times cheaper than indexing a memoryview
    size = len(data)
    pos = 0
    for _ in range(header.records_count):
        length, pos = _varint(data, pos)
        end = pos + length
        if length < 1 or end > size:
            raise CorruptRecordError(f"record length {length} runs past the batch")
        _, field = _varint(data, pos + 1)  # attributes, then the timestamp delta
        offset_delta, field = _varint(data, field)
        key_length, field = _varint(data, field)
        if key_length < 0:
            key = None
        elif field + key_length > end:
            raise CorruptRecordError("record key runs past the end of the record")
        else:
            key = data[field:field + key_length]
            field += key_length
        value_length, _ = _varint(data, field)
        yield header.base_offset + offset_delta, key, value_length < 0
        pos = end
    if pos != size:
        raise CorruptRecordError(f"{size - pos} bytes left after {header.records_count} records")


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """decode_varint with the one-byte case (lengths and deltas of small records) answered inline."""
    if pos < len(data):
        byte = data[pos]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), pos + 1
    return decode_varint(data, pos)
