"""Checks on batches before they are appended (the part of Kafka's LogValidator replog needs).

A leader validates what producers send and assigns offsets; a follower keeps the leader's offsets, which
must continue its log exactly. Batches are validated as views over the request buffer, never copied.
"""

from __future__ import annotations

from replog.log.errors import RecordTooLargeError, UnexpectedAppendOffsetError
from replog.protocol.record_compaction import iter_record_keys
from replog.protocol.records import InvalidRecordError, RecordBatch, iter_batches


def validate_batches(
    records: memoryview | bytes | bytearray, *, leader: bool, max_message_bytes: int
) -> tuple[memoryview, list[RecordBatch]]:
    """The batches tiling `records`, each with a valid CRC; from a producer (`leader`), also within
    max.message.bytes and with a record count that matches its last offset delta."""
    view = records if isinstance(records, memoryview) else memoryview(records)
    if len(view) == 0:
        raise InvalidRecordError("append carries no record batches")
    batches = list(iter_batches(view))
    for batch in batches:
        batch.ensure_valid()
        if leader and batch.size_in_bytes > max_message_bytes:
            raise RecordTooLargeError(
                f"batch of {batch.size_in_bytes} bytes exceeds max.message.bytes {max_message_bytes}"
            )
        if leader and (batch.records_count < 1 or batch.last_offset_delta != batch.records_count - 1):
            raise InvalidRecordError(
                f"batch has {batch.records_count} records but lastOffsetDelta {batch.last_offset_delta}"
            )
    return view, batches


def check_keys_for_compaction(batches: list[RecordBatch]) -> None:
    """A compacted topic refuses a record without a key (Kafka's LogValidator: INVALID_RECORD), since the
    cleaner could only drop it. Reads the keys, so it costs a pass over the records (and a decompression)
    that other topics do not pay."""
    for batch in batches:
        for offset_delta, (_, key, _) in enumerate(iter_record_keys(batch)):
            if key is None:
                raise InvalidRecordError(f"compacted topic cannot accept a record without a key "
                                         f"(record {offset_delta} of its batch)")


def assign_offsets(batches: list[RecordBatch], *, first_offset: int, leader_epoch: int) -> None:
    """Stamp consecutive offsets from `first_offset` and the leader epoch into the batches, in place."""
    assert first_offset >= 0
    assert leader_epoch >= 0
    next_offset = first_offset
    for batch in batches:
        batch.stamp(base_offset=next_offset, partition_leader_epoch=leader_epoch)
        next_offset = batch.next_offset


def check_follower_offsets(batches: list[RecordBatch], log_end_offset: int, log_name: str) -> None:
    """The leader's batches must start at or after our LEO and follow each other in offset order. Gaps are
    legitimate: a compacted leader log has them, and a follower copies it as it is (Kafka's
    UnexpectedAppendOffsetException is only for a batch below the LEO)."""
    expected = log_end_offset
    for batch in batches:
        if batch.base_offset < expected:
            raise UnexpectedAppendOffsetError(
                f"{log_name}: batch starts at {batch.base_offset}, below the expected {expected}")
        expected = batch.next_offset
