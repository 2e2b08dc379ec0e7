"""The leader's answer to the follower's Fetch v12, decoded straight into the fetcher's partition map.

protocol.fetch.decode_fetch_response builds the response's object tree (the response, a list and an object
per topic) and reads each field through its own bounds-checked call; the follower then walks that tree into a
dict by partition. An answer arrives after every append of every followed partition, so this decoder goes
from the frame to that dict directly and reads each partition's five fixed fields with one struct call after
one bounds check. Same bounds as the Reader: every length is checked against the bytes left before use.
tests/unit/test_fetch_answer.py checks it against decode_fetch_response field for field.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from replog.log.partition_log import TopicPartition
from replog.protocol.fetch import TAG_CURRENT_LEADER, TAG_DIVERGING_EPOCH, FetchPartitionResult
from replog.protocol.primitives import DecodeError, Reader

_HEAD = struct.Struct(">ihi")  # throttle time, error code, session id
_PARTITION_HEAD = struct.Struct(">ihqqq")  # partition, error code, HW, last stable offset, log start offset
_ABORTED = struct.Struct(">qq")  # producer id, first offset
_DIVERGING_EPOCH = struct.Struct(">iq")  # epoch, end offset
_CURRENT_LEADER = struct.Struct(">ii")  # leader id, leader epoch


class FetchAnswer(NamedTuple):
    error_code: int
    session_id: int
    partitions: dict[TopicPartition, FetchPartitionResult]


def decode_fetch_answer(frame: bytearray | memoryview, offset: int) -> FetchAnswer:
    """FetchResponse v12's body (the version the follower asks for, FETCH_REQUEST_VERSION) from `offset`;
    records stay memoryviews into `frame`. DecodeError if garbled."""
    r = Reader(frame, offset)
    _, error_code, session_id = _HEAD.unpack_from(r.raw(_HEAD.size))
    partitions: dict[TopicPartition, FetchPartitionResult] = {}
    for _ in range(max(0, r.array_length(compact=True))):
        topic = r.string(compact=True)
        for _ in range(max(0, r.array_length(compact=True))):
            index, error, high_watermark, last_stable, log_start = _PARTITION_HEAD.unpack_from(
                r.raw(_PARTITION_HEAD.size)
            )
            p = FetchPartitionResult(index, error, high_watermark, last_stable, log_start)
            count = r.array_length(compact=True)
            if count >= 0:
                p.aborted_transactions = []
                for _ in range(count):
                    p.aborted_transactions.append(_ABORTED.unpack_from(r.raw(_ABORTED.size)))
                    r.skip_tagged_fields()
            p.preferred_read_replica = r.int32()
            p.records = r.nullable_bytes(compact=True)
            if r.pos < len(r.buf) and r.buf[r.pos] == 0:
                r.pos += 1  # no tagged fields, the usual case: one zero byte
            else:
                for tag, value in r.tagged_fields().items():
                    if tag == TAG_DIVERGING_EPOCH:
                        p.diverging_epoch = _read(_DIVERGING_EPOCH, value)
                    elif tag == TAG_CURRENT_LEADER:
                        p.current_leader = _read(_CURRENT_LEADER, value)
            partitions[TopicPartition(topic, index)] = p
        r.skip_tagged_fields()
    r.skip_tagged_fields()
    if r.remaining:
        raise DecodeError(f"{r.remaining} trailing bytes after FetchResponse")
    return FetchAnswer(error_code, session_id, partitions)


def _read(fields: struct.Struct, value: memoryview) -> tuple:
    # A tagged struct may grow fields in later versions: read ours, ignore the rest (as the Reader does).
    if len(value) < fields.size:
        raise DecodeError(f"tagged field of {len(value)} bytes, need {fields.size}")
    return fields.unpack_from(value)
