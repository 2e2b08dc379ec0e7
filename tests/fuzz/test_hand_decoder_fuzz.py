"""Differential fuzzing of the hand-written hot-path decoders against the general decoders they replaced.

decode_produce_request (every Produce request, protocol/produce.py) is held to kio's decoding of the same
bytes, and decode_fetch_answer (every answer a follower gets, fetcher/fetch_answer.py) to
decode_fetch_response, on mutated frames: cuts at every length, every hostile length or count at every
position, bit flips, and random edits. Each must raise nothing but DecodeError, and must read what its reference
reads: a frame one accepts and the other refuses, or reads differently, is a bug in one of them. The one
difference allowed: kio refuses an unknown tagged field in a Produce request, which Kafka and the hand decoder
skip (KIP-482).

Runs derandomized; REPLOG_FUZZ_EXAMPLES=20000 for a long run.
"""

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replog.fetcher.fetch_answer import decode_fetch_answer
from replog.log.partition_log import TopicPartition
from replog.protocol.apis import SUPPORTED_APIS, ApiKey
from replog.protocol.fetch import (
    FetchPartitionResult,
    FetchResponseData,
    FetchTopicResult,
    decode_fetch_response,
    encode_fetch_response,
)
from replog.protocol.fetch_request import FETCH_REQUEST_VERSION
from replog.protocol.messages import decode_request, millis
from replog.protocol.primitives import DecodeError
from replog.protocol.produce import (
    ProducePartitionData,
    ProduceRequestData,
    ProduceTopicData,
    decode_produce_request,
    encode_produce_request,
)
from replog.protocol.records import build_batch
from tests.fuzz.corpus import (
    HOSTILE_LENGTHS,
    SAMPLE_BATCH,
    Mutation,
    apply_mutations,
    mutation_lists,
)

EXAMPLES = int(os.environ.get("REPLOG_FUZZ_EXAMPLES", "300"))
# No deadline: each example decodes a frame twice in microseconds, and on the shared VM a descheduled example
# once took 678 ms, a failure that said nothing about the decoders.
FUZZ_SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PRODUCE_VERSIONS = list(range(SUPPORTED_APIS[ApiKey.PRODUCE].min_version,
                              SUPPORTED_APIS[ApiKey.PRODUCE].max_version + 1))

mutations = mutation_lists(max_position=512, max_data_size=16, max_count=4)


def _produce_body(version: int, request: ProduceRequestData) -> bytes:
    return b"".join(bytes(part) for part in encode_produce_request(version, request))


def _partition(index: int, records: bytes | None) -> ProducePartitionData:
    return ProducePartitionData(index, None if records is None else memoryview(bytearray(records)))


# Seeds: a transactional request with two topics (one partition's records null, one empty) and the usual one.
PRODUCE_SEEDS = [
    ProduceRequestData(None, -1, 5000, [ProduceTopicData("t", [_partition(0, SAMPLE_BATCH)])]),
    ProduceRequestData("tx", 1, 30_000, [ProduceTopicData("a", [_partition(0, SAMPLE_BATCH[:30]), _partition(7, None)]),
                                         ProduceTopicData("é", [_partition(2, b"")])]),
]  # fmt: skip

BATCH = build_batch([(None, b"v" * 20, [], 1_000)] * 2, base_offset=40, partition_leader_epoch=6)
FETCH_ANSWER_SEEDS = [
    FetchResponseData([FetchTopicResult("t", [FetchPartitionResult(1, 0, 45, 45, 3, BATCH)])], session_id=77),
    FetchResponseData([
        FetchTopicResult("orders", [
            FetchPartitionResult(0, 0, 2**40, 2**40 - 5, 0, BATCH, diverging_epoch=(4, 39)),
            FetchPartitionResult(7, 6, -1, -1, -1, None, current_leader=(2, 9)),
            FetchPartitionResult(9, 0, 10, 8, 0, memoryview(b""), aborted_transactions=[(5, 2)],
                                 preferred_read_replica=3),
        ]),
        FetchTopicResult("é", [FetchPartitionResult(2, 1, 7, 7, 7, None)]),
    ], throttle_time_ms=12, session_id=2**31 - 1),
]  # fmt: skip


def _fetch_answer_frame(response: FetchResponseData) -> bytes:
    return b"".join(bytes(part) for part in encode_fetch_response(FETCH_REQUEST_VERSION, response))


def _outcome(decode, frame: bytes) -> tuple[str, object]:
    """("ok", fields) or ("refused", message); any other exception escapes and fails the test."""
    try:
        return "ok", decode(bytearray(frame))
    except DecodeError as e:
        return "refused", str(e)


def _hand_produce(version: int):
    def decode(frame: bytearray) -> tuple:
        r = decode_produce_request(version, frame, 0)
        return (r.transactional_id, r.acks, r.timeout_ms,
                [(t.name, [(p.index, None if p.records is None else bytes(p.records)) for p in t.partitions])
                 for t in r.topics])
    return decode


def _kio_produce(version: int):
    def decode(frame: bytearray) -> tuple:
        r = decode_request(ApiKey.PRODUCE, version, frame, 0)
        return (r.transactional_id, r.acks, millis(r.timeout),
                [(t.name, [(p.index, p.records) for p in t.partition_data]) for t in r.topic_data])
    return decode


def assert_produce_decoders_agree(version: int, frame: bytes) -> None:
    hand, kio = _outcome(_hand_produce(version), frame), _outcome(_kio_produce(version), frame)
    if hand[0] == "ok" and kio[0] == "refused" and "Unknown tagged field" in kio[1]:
        return  # kio's refusal, not Kafka's: the hand decoder skips it as Kafka does
    # Both refuse (their messages may differ), or both read the same fields.
    assert (hand[0], hand[1] if hand[0] == "ok" else None) == (kio[0], kio[1] if kio[0] == "ok" else None), (
        version, frame.hex())


def _partitions_read(answer_partitions: dict) -> list:
    return [(tp, p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset,
             p.aborted_transactions, p.preferred_read_replica, p.diverging_epoch, p.current_leader,
             None if p.records is None else bytes(p.records)) for tp, p in answer_partitions.items()]


def _hand_fetch_answer(frame: bytearray) -> tuple:
    answer = decode_fetch_answer(frame, 0)
    return answer.error_code, answer.session_id, _partitions_read(answer.partitions)


def _reference_fetch_answer(frame: bytearray) -> tuple:
    response = decode_fetch_response(FETCH_REQUEST_VERSION, frame, 0)
    flat = {TopicPartition(t.topic, p.partition_index): p for t in response.topics for p in t.partitions}
    return response.error_code, response.session_id, _partitions_read(flat)


def assert_fetch_answer_decoders_agree(frame: bytes) -> None:
    hand, reference = _outcome(_hand_fetch_answer, frame), _outcome(_reference_fetch_answer, frame)
    # Both refuse (their messages may differ), or both read the same fields.
    assert (hand[0], hand[1] if hand[0] == "ok" else None) == (
        reference[0], reference[1] if reference[0] == "ok" else None), frame.hex()


def _every_cut_and_hostile_length(frame: bytes) -> list[bytes]:
    cuts = [frame[:end] for end in range(len(frame))]
    hostile = [bytes(apply_mutations(frame, [Mutation("overwrite", position, data=length)]))
               for position in range(len(frame)) for length in HOSTILE_LENGTHS]
    flips = [bytes(apply_mutations(frame, [Mutation("flip", position, value=bit)]))
             for position in range(len(frame)) for bit in range(8)]
    return cuts + hostile + flips


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
@pytest.mark.parametrize("seed", range(len(PRODUCE_SEEDS)))
def test_produce_decoder_reads_every_cut_hostile_length_and_flip_as_kio(version, seed):
    frame = _produce_body(version, PRODUCE_SEEDS[seed])
    assert_produce_decoders_agree(version, frame)
    for mutated in _every_cut_and_hostile_length(frame):
        assert_produce_decoders_agree(version, mutated)


@FUZZ_SETTINGS
@given(version=st.sampled_from(PRODUCE_VERSIONS), seed=st.sampled_from(PRODUCE_SEEDS), edits=mutations)
def test_produce_decoder_reads_mutated_requests_as_kio(version, seed, edits):
    assert_produce_decoders_agree(version, bytes(apply_mutations(_produce_body(version, seed), edits)))


@pytest.mark.parametrize("seed", range(len(FETCH_ANSWER_SEEDS)))
def test_fetch_answer_decoder_reads_every_cut_hostile_length_and_flip_as_decode_fetch_response(seed):
    frame = _fetch_answer_frame(FETCH_ANSWER_SEEDS[seed])
    assert_fetch_answer_decoders_agree(frame)
    for mutated in _every_cut_and_hostile_length(frame):
        assert_fetch_answer_decoders_agree(mutated)


@FUZZ_SETTINGS
@given(seed=st.sampled_from(FETCH_ANSWER_SEEDS), edits=mutations)
def test_fetch_answer_decoder_reads_mutated_answers_as_decode_fetch_response(seed, edits):
    assert_fetch_answer_decoders_agree(bytes(apply_mutations(_fetch_answer_frame(seed), edits)))


@FUZZ_SETTINGS
@given(body=st.binary(max_size=300))
def test_fetch_answer_decoder_reads_random_bytes_as_decode_fetch_response(body):
    assert_fetch_answer_decoders_agree(body)
