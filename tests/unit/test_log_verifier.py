"""The independent on-disk verifier: a log replog wrote passes; each kind of damage it exists to catch is
reported (bad CRC, offset gap, misplaced index entry, disordered time index, bad epoch checkpoint, HW past
the log end), and a short last write is tolerated only where a crash can leave one."""

import struct

import pytest

from replog.chaos.log_verifier import (
    HIGH_WATERMARK_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    OFFSET_INDEX_ENTRY,
    TIME_INDEX_ENTRY,
    verify_log_dir,
    verify_partition,
)
from replog.log.config import LogConfig
from replog.log.partition_log import PartitionLog
from replog.protocol.records import build_batch

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=100, segment_index_bytes=4096)
BATCHES = 30  # of two records each: five segments of 600 bytes


def write_log(directory, *, close: bool = True) -> PartitionLog:
    log = PartitionLog.open(directory, CONFIG, clock_ms=lambda: 0, clean_shutdown=True)
    for i in range(BATCHES):
        records = [(None, b"value-%d" % i, [], 1000 + i)] * 2
        log.append_as_leader(memoryview(bytearray(build_batch(records))), leader_epoch=i // 10)
    if close:
        log.close()
    return log


@pytest.fixture
def partition(tmp_path):
    directory = tmp_path / "t-0"
    write_log(directory)
    return directory


def segments(directory):
    return sorted(directory.glob("*.log"))


def test_a_log_written_and_closed_by_replog_passes_every_check(partition):
    report = verify_partition(partition, exact_epochs=True)
    assert report.problems == []
    assert [b.base_offset for b in report.batches] == list(range(0, 2 * BATCHES, 2))
    assert report.log_end == 2 * BATCHES
    assert len(segments(partition)) > 2


def test_a_live_log_with_preallocated_indexes_passes(tmp_path):
    log = write_log(tmp_path / "t-0", close=False)
    try:
        assert verify_partition(tmp_path / "t-0", torn_tail=True).problems == []
    finally:
        log.close()


def test_a_flipped_byte_inside_a_batch_is_a_bad_crc_even_where_a_torn_tail_is_allowed(partition):
    last = segments(partition)[-1]
    data = bytearray(last.read_bytes())
    data[-5] ^= 0xFF  # in the last record of the last batch: covered by the CRC
    last.write_bytes(data)
    for torn_tail in (False, True):
        problems = verify_partition(partition, torn_tail=torn_tail).problems
        assert any("bad CRC-32C" in p for p in problems), problems


def test_an_offset_gap_inside_a_segment_is_reported(partition):
    first = segments(partition)[0]
    data = bytearray(first.read_bytes())
    second_batch = struct.unpack_from(">i", data, 8)[0] + 12
    # The base offset is outside the CRC, so the batch stays valid and only the numbering is wrong.
    struct.pack_into(">q", data, second_batch, struct.unpack_from(">q", data, second_batch)[0] + 1)
    first.write_bytes(data)
    problems = verify_partition(partition).problems
    assert any("starts at offset 3, expected 2" in p for p in problems), problems


def test_a_missing_middle_segment_is_a_gap(partition):
    middle = segments(partition)[2]
    for suffix in (".log", ".index", ".timeindex"):
        middle.with_suffix(suffix).unlink()
    problems = verify_partition(partition).problems
    assert any("starts after a gap" in p for p in problems), problems


def test_an_index_entry_pointing_inside_a_batch_is_reported(partition):
    index = segments(partition)[0].with_suffix(".index")
    relative, position = OFFSET_INDEX_ENTRY.unpack_from(index.read_bytes(), 0)
    data = bytearray(index.read_bytes())
    OFFSET_INDEX_ENTRY.pack_into(data, 0, relative, position + 1)
    index.write_bytes(data)
    problems = verify_partition(partition).problems
    assert any("where no batch starts" in p for p in problems), problems


def test_an_index_entry_naming_an_offset_of_another_batch_is_reported(partition):
    index = segments(partition)[0].with_suffix(".index")
    data = bytearray(index.read_bytes())
    relative, position = OFFSET_INDEX_ENTRY.unpack_from(data, 0)
    OFFSET_INDEX_ENTRY.pack_into(data, 0, relative + 2, position)  # the next batch's offset
    index.write_bytes(data)
    problems = verify_partition(partition).problems
    assert any("points at the batch holding" in p for p in problems), problems


def test_a_time_index_going_backwards_is_reported(partition):
    index = segments(partition)[0].with_suffix(".timeindex")
    data = bytearray(index.read_bytes())
    assert len(data) >= 2 * TIME_INDEX_ENTRY.size
    timestamp, relative = TIME_INDEX_ENTRY.unpack_from(data, TIME_INDEX_ENTRY.size)
    TIME_INDEX_ENTRY.pack_into(data, TIME_INDEX_ENTRY.size, 0, relative)
    index.write_bytes(data)
    problems = verify_partition(partition).problems
    assert any("time index entry" in p for p in problems), problems


def test_a_short_last_write_is_tolerated_only_at_the_end_of_the_last_segment(partition):
    last, earlier = segments(partition)[-1], segments(partition)[1]
    # A write cut short: the start of one more batch, which no index entry can know about yet.
    short_write = bytes(build_batch([(None, b"cut short", [], 2000)]))[:-7]
    last.write_bytes(last.read_bytes() + short_write)
    assert any("torn" in p for p in verify_partition(partition).problems)
    crashed = verify_partition(partition, torn_tail=True)
    assert crashed.problems == []
    assert crashed.torn_tail_bytes > 0
    earlier.write_bytes(earlier.read_bytes() + short_write)
    problems = verify_partition(partition, torn_tail=True).problems
    assert any(f"segment {int(earlier.stem)}: torn" in p for p in problems), problems


def test_garbage_after_the_last_batch_is_not_a_short_write(partition):
    last = segments(partition)[-1]
    last.write_bytes(last.read_bytes() + bytes(range(100)))
    problems = verify_partition(partition, torn_tail=True).problems
    assert any("not a batch" in p for p in problems), problems


def test_a_leader_epoch_checkpoint_out_of_order_or_off_the_batches_is_reported(partition):
    checkpoint = partition / LEADER_EPOCH_CHECKPOINT
    checkpoint.write_text("0\n3\n0 0\n2 20\n1 40\n")
    problems = verify_partition(partition).problems
    assert any("not monotonic" in p for p in problems), problems
    checkpoint.write_text("0\n2\n0 0\n1 18\n")  # epoch 1 starts at offset 20
    problems = verify_partition(partition).problems
    assert any("starts at 18, but the log has epoch 0" in p for p in problems), problems
    checkpoint.write_text("0\n2\n0 0\n1 22\n")  # the batch at 22 has epoch 1, the one at 20 too
    assert verify_partition(partition).problems == []
    problems = verify_partition(partition, exact_epochs=True).problems
    assert any("batch at offset 20 has epoch 1, the checkpoint says 0" in p for p in problems), problems


def test_a_high_watermark_checkpoint_past_the_log_end_is_reported(partition):
    (partition.parent / HIGH_WATERMARK_CHECKPOINT).write_text(f"0\n1\nt 0 {2 * BATCHES + 1}\n")
    problems = verify_log_dir(partition.parent, "t").all_problems
    assert any(f"past its log end {2 * BATCHES}" in p for p in problems), problems
    (partition.parent / HIGH_WATERMARK_CHECKPOINT).write_text(f"0\n1\nt 0 {2 * BATCHES}\n")
    assert verify_log_dir(partition.parent, "t").all_problems == []
