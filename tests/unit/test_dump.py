from replog.log.dump import dump_log_file, format_dump
from replog.log.segment import LogSegment
from replog.protocol.records import Compression, build_batch, iter_batches


def _segment(tmp_path, base=0):
    segment = LogSegment(tmp_path, base, index_interval_bytes=4096, max_index_bytes=4096, created_ms=0)
    for i in range(3):
        data = bytearray(
            build_batch([(None, b"x" * 100, [], 100 + i)] * 10, compression=Compression.GZIP,
                        producer_id=5, producer_epoch=1, base_sequence=10 * i)
        )  # fmt: skip
        [batch] = iter_batches(data)
        batch.stamp(base_offset=base + 10 * i, partition_leader_epoch=2)
        segment.append(batch.last_offset, memoryview(data), batch.max_timestamp, batch.last_offset)
    segment.close()
    return segment


def test_dump_entries_and_format(tmp_path):
    segment = _segment(tmp_path)
    entries = list(dump_log_file(segment.log_path))
    assert [(e["base_offset"], e["last_offset"], e["count"]) for e in entries] == [
        (0, 9, 10),
        (10, 19, 10),
        (20, 29, 10),
    ]
    assert all(
        e["crc_valid"] and e["compression"] == "gzip" and e["partition_leader_epoch"] == 2 for e in entries
    )
    assert entries[1]["position"] == entries[0]["size"]
    text = format_dump(entries)
    assert "baseOffset: 10 lastOffset: 19 count: 10 baseSequence: 10 producerId: 5" in text
    assert "partitionLeaderEpoch: 2" in text
    assert text.count("isvalid: true") == 3


def test_dump_torn_and_corrupt(tmp_path):
    segment = _segment(tmp_path)
    data = bytearray(segment.log_path.read_bytes())
    data[80] ^= 0xFF
    segment.log_path.write_bytes(data[:-7])
    entries = list(dump_log_file(segment.log_path))
    assert not entries[0]["crc_valid"]
    assert entries[1]["crc_valid"]
    assert "error" in entries[-1]
    assert len(entries) == 3
    assert "Found invalid data at position" in format_dump(entries)


def test_dump_directory_in_order(tmp_path):
    _segment(tmp_path, base=30)
    _segment(tmp_path, base=0)
    entries = list(dump_log_file(tmp_path))
    assert [e["base_offset"] for e in entries] == [0, 10, 20, 30, 40, 50]
    assert format_dump(entries).count("Dumping") == 2
