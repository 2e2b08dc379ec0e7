import struct

import pytest
from crc32c import crc32c
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from replog.protocol.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    Compression,
    CorruptRecordError,
    RecordBatch,
    UnsupportedMagicError,
    build_batch,
    decode_records,
    decode_varint,
    encode_varint,
    increment_sequence,
    iter_batches,
)

# One record, key null, value b"hi", no headers, timestamp 1000, all sentinels.
# Hand-derived from the v2 layout (facts section 1):
GOLDEN_RECORD = bytes.fromhex(
    "10"  # record length 8, zig-zag -> 0x10
    "00"  # attributes
    "00"  # timestamp delta 0
    "00"  # offset delta 0
    "01"  # key length -1 (null) -> zig-zag 1
    "04"
    "6869"  # value length 2 -> 4, b"hi"
    "00"  # header count 0
)
GOLDEN_CRC = 0x233DAD44
GOLDEN_BATCH = (
    bytes.fromhex("0000000000000000")  # base offset 0
    + struct.pack(">i", RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(GOLDEN_RECORD))  # length 58
    + bytes.fromhex("ffffffff")  # partition leader epoch -1
    + bytes.fromhex("02")  # magic
    + struct.pack(">I", GOLDEN_CRC)
    + bytes.fromhex("0000")  # attributes
    + bytes.fromhex("00000000")  # last offset delta
    + struct.pack(">qq", 1000, 1000)  # base and max timestamp
    + bytes.fromhex("ffffffffffffffffffffffffffff")  # producer id, epoch, base sequence
    + bytes.fromhex("00000001")  # records count
    + GOLDEN_RECORD
)


def test_golden_bytes_and_crc():
    assert build_batch([(None, b"hi", [], 1000)]) == GOLDEN_BATCH
    assert crc32c(GOLDEN_BATCH[ATTRIBUTES_OFFSET:]) == GOLDEN_CRC
    [batch] = iter_batches(GOLDEN_BATCH)
    assert batch.crc == GOLDEN_CRC
    assert batch.is_crc_valid()
    assert batch.size_in_bytes == len(GOLDEN_BATCH) == 70


def test_matches_kafka_python_builder_byte_for_byte():
    builder = DefaultRecordBatchBuilder(2, 0, False, 7, 3, 42, 1 << 20)
    records = [(b"k%d" % i, b"v" * i, [("h", b"x"), ("n", None)], 5000 + 3 * i) for i in range(5)]
    for i, (key, value, headers, ts) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    theirs = bytes(builder.build())
    ours = build_batch(records, partition_leader_epoch=0, producer_id=7, producer_epoch=3, base_sequence=42)
    assert ours == theirs


def test_decode_what_kafka_python_builds():
    builder = DefaultRecordBatchBuilder(2, 1, False, -1, -1, -1, 1 << 20)  # gzip
    builder.append(0, timestamp=10, key=None, value=b"a" * 500, headers=[])
    builder.append(1, timestamp=30, key=b"k", value=None, headers=[("x", b"1")])
    [batch] = iter_batches(bytes(builder.build()))
    assert batch.compression == Compression.GZIP
    assert batch.max_timestamp == 30
    records = decode_records(batch)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records] == [
        (0, 10, None, b"a" * 500, []),
        (1, 30, b"k", None, [("x", b"1")]),
    ]


def test_kafka_python_reads_what_we_build():
    data = build_batch([(b"k", b"v", [], 1), (None, b"w", [], 9)], base_offset=100)
    theirs = DefaultRecordBatch(data)
    assert theirs.validate_crc()
    assert [(r.offset, r.timestamp, r.value) for r in theirs] == [(100, 1, b"v"), (101, 9, b"w")]


def test_header_properties():
    data = build_batch(
        [(None, b"a", [], 50), (None, b"b", [], 40), (None, b"c", [], 60)],
        base_offset=10, partition_leader_epoch=4, producer_id=99, producer_epoch=2,
        base_sequence=7, is_transactional=True,
    )  # fmt: skip
    [batch] = iter_batches(data)
    assert (batch.base_offset, batch.last_offset, batch.next_offset) == (10, 12, 13)
    assert (batch.base_timestamp, batch.max_timestamp) == (50, 60)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (99, 2, 7)
    assert batch.last_sequence == 9
    assert batch.partition_leader_epoch == 4
    assert batch.is_transactional
    assert not batch.is_control
    assert batch.records_count == 3


def test_last_sequence_wraps_like_kafka():
    assert increment_sequence(2**31 - 1, 1) == 0
    assert increment_sequence(2**31 - 2, 3) == 1
    [batch] = iter_batches(build_batch([(None, b"", [], 0)] * 3, base_sequence=2**31 - 2))
    assert batch.last_sequence == 0
    [unsequenced] = iter_batches(build_batch([(None, b"", [], 0)] * 3))
    assert unsequenced.last_sequence == -1


def test_flipped_byte_fails_crc():
    data = bytearray(GOLDEN_BATCH)
    data[-2] ^= 0x01
    [batch] = iter_batches(data)
    assert not batch.is_crc_valid()
    with pytest.raises(CorruptRecordError):
        batch.ensure_valid()


def test_stamp_keeps_crc_valid():
    data = bytearray(build_batch([(None, b"x", [], 1)] * 4))
    [batch] = iter_batches(data)
    batch.stamp(base_offset=1234567, partition_leader_epoch=17)
    assert batch.is_crc_valid()
    [again] = iter_batches(data)
    assert (again.base_offset, again.last_offset, again.partition_leader_epoch) == (1234567, 1234570, 17)
    assert [r.offset for r in decode_records(again)] == [1234567, 1234568, 1234569, 1234570]


@pytest.mark.parametrize(
    "value, encoded",
    [(0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (-64, "7f"), (64, "8001"), (2**31 - 1, "feffffff0f"),
     (-(2**31), "ffffffff0f"), (2**63 - 1, "feffffffffffffffff01"), (-(2**63), "ffffffffffffffffff01")],
)  # fmt: skip
def test_varint_edges(value, encoded):
    out = bytearray()
    encode_varint(value, out)
    assert out.hex() == encoded
    assert decode_varint(bytes(out) + b"\xff", 0) == (value, len(out))


def test_varint_truncated_or_too_long():
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x80\x80", 0)
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\xff" * 11, 0)


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varint_round_trip(value):
    out = bytearray()
    encode_varint(value, out)
    assert decode_varint(out, 0) == (value, len(out))


def _three_batches() -> bytes:
    return b"".join(build_batch([(None, b"v%d" % i, [], i)], base_offset=i) for i in range(3))


def test_iter_batches_whole_and_byte_by_byte_prefixes():
    data = _three_batches()
    assert [b.base_offset for b in iter_batches(data)] == [0, 1, 2]
    sizes = [b.size_in_bytes for b in iter_batches(data)]
    for cut in range(len(data) + 1):
        complete = sum(1 for end in (sizes[0], sizes[0] + sizes[1], len(data)) if end <= cut)
        assert len(list(iter_batches(data[:cut], allow_partial_tail=True))) == complete
        if complete < 3 and cut not in (0, sizes[0], sizes[0] + sizes[1]):
            with pytest.raises(CorruptRecordError):
                list(iter_batches(data[:cut]))


def test_iter_batches_trailing_garbage_length():
    data = bytearray(_three_batches()) + struct.pack(">qi", 0, 5) + b"\0" * 60
    with pytest.raises(CorruptRecordError):
        list(iter_batches(data))
    with pytest.raises(CorruptRecordError):
        list(iter_batches(data, allow_partial_tail=True))


def test_wrong_magic_rejected():
    data = bytearray(GOLDEN_BATCH)
    data[MAGIC_OFFSET] = 1
    with pytest.raises(UnsupportedMagicError):
        list(iter_batches(data))


def test_record_batch_requires_exact_buffer():
    with pytest.raises(CorruptRecordError):
        RecordBatch(memoryview(GOLDEN_BATCH + b"\0"))


def test_iter_batches_does_not_copy():
    data = bytearray(_three_batches())
    batches = list(iter_batches(data))
    assert all(b.buffer.obj is data for b in batches)


def test_corrupt_record_body_detected():
    data = bytearray(GOLDEN_BATCH)
    data[RECORD_BATCH_OVERHEAD] = 0x7E  # record length 63 runs past the batch
    struct.pack_into(">I", data, CRC_OFFSET, crc32c(bytes(data[ATTRIBUTES_OFFSET:])))
    [batch] = iter_batches(data)
    assert batch.is_crc_valid()
    with pytest.raises(CorruptRecordError):
        decode_records(batch)


@pytest.mark.parametrize("codec", list(Compression))
def test_build_decode_round_trip_each_codec(codec):
    records = [(b"key%d" % i, b"value" * i, [(f"h{i}", None)], 1000 + i) for i in range(50)]
    [batch] = iter_batches(build_batch(records, compression=codec, base_offset=5))
    assert batch.compression == codec
    assert batch.is_crc_valid()
    decoded = decode_records(batch)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded] == [
        (5 + i, ts, k, v, list(h)) for i, (k, v, h, ts) in enumerate(records)
    ]
