"""Consumer-side decoding of fetched record data: offsets below the fetch offset, partial tails, control batches."""

import struct

from crc32c import crc32c

from replog.client.consumer_records import decode_fetched
from replog.protocol.records import ATTRIBUTES_OFFSET, CRC_OFFSET, RecordBatch, build_batch


def batch_at(base_offset: int, count: int, *, control: bool = False) -> bytes:
    records = [(b"k%d" % (base_offset + i), b"v%d" % (base_offset + i), (), 1000 + i) for i in range(count)]
    buf = bytearray(build_batch(records))
    RecordBatch(memoryview(buf)).stamp(base_offset=base_offset, partition_leader_epoch=0)
    if control:
        (attributes,) = struct.unpack_from(">h", buf, ATTRIBUTES_OFFSET)
        struct.pack_into(">h", buf, ATTRIBUTES_OFFSET, attributes | 0x20)
        struct.pack_into(">I", buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(buf)


def test_records_below_the_fetch_offset_are_skipped():
    data = memoryview(batch_at(0, 5) + batch_at(5, 5))
    records, next_offset = decode_fetched("t", 0, data, 3)
    assert [r.offset for r in records] == list(range(3, 10))
    assert records[0].value == b"v3"
    assert records[0].key == b"k3"
    assert next_offset == 10


def test_partial_trailing_batch_is_ignored():
    whole = batch_at(0, 5) + batch_at(5, 5)
    records, next_offset = decode_fetched("t", 0, memoryview(whole)[: len(whole) - 7], 0)
    assert [r.offset for r in records] == list(range(5))
    assert next_offset == 5


def test_control_batches_advance_the_position_without_records():
    data = batch_at(0, 2) + batch_at(2, 1, control=True)
    records, next_offset = decode_fetched("t", 0, data, 0)
    assert [r.offset for r in records] == [0, 1]
    assert next_offset == 3
    assert decode_fetched("t", 0, batch_at(2, 1, control=True), 2) == ([], 3)


def test_empty_or_null_records():
    assert decode_fetched("t", 0, None, 7) == ([], 7)
    assert decode_fetched("t", 0, b"", 7) == ([], 7)
