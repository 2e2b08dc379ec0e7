"""The follower's decoder of the leader's Fetch answer (replog.fetcher.fetch_answer) reads what
protocol.fetch.decode_fetch_response reads, field for field, and refuses what it refuses."""

from __future__ import annotations

import pytest

from replog.fetcher.fetch_answer import decode_fetch_answer
from replog.log.partition_log import TopicPartition
from replog.protocol.fetch import (
    FetchPartitionResult,
    FetchResponseData,
    FetchTopicResult,
    decode_fetch_response,
    encode_fetch_response,
)
from replog.protocol.fetch_request import FETCH_REQUEST_VERSION
from replog.protocol.primitives import DecodeError
from replog.protocol.records import build_batch

BATCH = build_batch([(None, b"v" * 100, [], 1_000)] * 3, base_offset=40, partition_leader_epoch=6)
ANSWERS = {
    "one partition with records": FetchResponseData(
        [FetchTopicResult("latency", [FetchPartitionResult(1, 0, 45, 45, 3, BATCH)])], session_id=77
    ),
    "nothing new (an empty incremental answer)": FetchResponseData([], session_id=77),
    "session error": FetchResponseData([], error_code=70, session_id=0),
    "tagged fields, aborted transactions, errors, two topics": FetchResponseData(
        [
            FetchTopicResult("orders", [
                FetchPartitionResult(0, 0, 2**40, 2**40 - 5, 0, BATCH, diverging_epoch=(4, 39)),
                FetchPartitionResult(7, 6, -1, -1, -1, None, current_leader=(2, 9)),
                FetchPartitionResult(9, 0, 10, 8, 0, memoryview(b""), aborted_transactions=[(5, 2), (6, 7)],
                                     preferred_read_replica=3),
            ]),
            FetchTopicResult("é-topic", [FetchPartitionResult(2, 1, 7, 7, 7, None)]),
        ],
        throttle_time_ms=12, session_id=2**31 - 1,
    ),  # fmt: skip
}


def _frame(response: FetchResponseData) -> bytearray:
    return bytearray(b"".join(bytes(part) for part in encode_fetch_response(FETCH_REQUEST_VERSION, response)))


@pytest.mark.parametrize("response", ANSWERS.values(), ids=ANSWERS.keys())
def test_the_answer_reads_as_decode_fetch_response_reads_it(response):
    frame = _frame(response)
    expected = decode_fetch_response(FETCH_REQUEST_VERSION, frame, 0)
    answer = decode_fetch_answer(frame, 0)
    assert (answer.error_code, answer.session_id) == (expected.error_code, expected.session_id)
    flat = {TopicPartition(t.topic, p.partition_index): p for t in expected.topics for p in t.partitions}
    assert list(answer.partitions) == list(flat)
    for tp, p in answer.partitions.items():
        want = flat[tp]
        assert isinstance(tp, TopicPartition)
        assert (p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset) == (
            want.error_code, want.high_watermark, want.last_stable_offset, want.log_start_offset)  # fmt: skip
        assert (p.diverging_epoch, p.current_leader, p.preferred_read_replica) == (
            want.diverging_epoch, want.current_leader, want.preferred_read_replica)  # fmt: skip
        assert p.aborted_transactions == want.aborted_transactions
        assert (None if p.records is None else bytes(p.records)) == (None if want.records is None else bytes(want.records))


def test_records_are_views_into_the_frame_not_copies():
    frame = _frame(ANSWERS["one partition with records"])
    records = decode_fetch_answer(frame, 0).partitions[TopicPartition("latency", 1)].records
    assert isinstance(records, memoryview) and records.obj is frame


@pytest.mark.parametrize("response", ANSWERS.values(), ids=ANSWERS.keys())
def test_a_cut_or_padded_answer_is_a_decode_error(response):
    frame = _frame(response)
    for end in range(len(frame)):
        with pytest.raises(DecodeError):
            decode_fetch_answer(frame[:end], 0)
    with pytest.raises(DecodeError):
        decode_fetch_answer(frame + b"\x00", 0)


def test_a_huge_array_length_is_refused_before_anything_is_allocated():
    frame = bytearray(_frame(ANSWERS["nothing new (an empty incremental answer)"]))
    frame[10:11] = b"\xff\xff\xff\xff\x07"  # the topics array claims 2**31 - 2 entries
    with pytest.raises(DecodeError, match="cannot fit"):
        decode_fetch_answer(frame, 0)
