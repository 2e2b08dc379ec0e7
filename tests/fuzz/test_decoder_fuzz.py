"""Fuzz the request decoding the broker does, header and body, and the record-batch validation path.

Frames go through the real Dispatcher (size-checked ids, version gate, SASL state, header decoding) into
handlers that only decode the body with the codec the broker's handler uses. The one error allowed out is
CloseConnection, which ServerConnection answers by closing the socket; anything else would reach its
"internal error" branch. Memory: tracemalloc bounds Python allocations per input, and VmPeak catches the
native reservations kio makes, which tracemalloc cannot see.

Runs derandomized; REPLOG_FUZZ_EXAMPLES=20000 for a long run.
"""

import asyncio
import functools
import os
import subprocess
import sys
import tracemalloc
from datetime import timedelta

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replog.broker.handlers import BROKER_APIS, leader_and_isr
from replog.protocol import control
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request
from replog.protocol.produce import decode_produce_request
from replog.protocol.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    CorruptRecordError,
    InvalidRecordError,
    decode_records,
    iter_batches,
)
from replog.server.auth import Session
from replog.server.dispatch import CloseConnection, Dispatcher
from tests.fuzz.corpus import (
    ADVERTISED_VERSIONS,
    HOSTILE_LENGTHS,
    SAMPLE_BATCHES,
    Mutation,
    apply_mutations,
    mutation_lists,
    sample_frame,
)

EXAMPLES = int(os.environ.get("REPLOG_FUZZ_EXAMPLES", "300"))
FUZZ_SETTINGS = settings(max_examples=EXAMPLES, deadline=timedelta(milliseconds=500), derandomize=True,
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Python memory one decode may take beyond the frame itself: decoded objects are a small multiple of the
# bytes they came from, plus a fixed allowance for caches warmed on first use (kio readers, schema plans).
FIXED_ALLOWANCE_BYTES = 512 * 1024
PER_FRAME_BYTE_ALLOWANCE = 64
# Every frame here is under 1 KB, so no honest decode reserves anywhere near this much address space; kio's
# unchecked reservation for a hostile array count is 8 bytes times up to 2**32.
VM_PEAK_GROWTH_LIMIT_KB = 256 * 1024

BATCH_ERRORS = (CorruptRecordError, InvalidRecordError)


def validate_records(records: memoryview | None) -> None:
    """What the broker does with a produced record set (replog.log.append_validation.validate_batches), then the record
    decoding consumers do; bad data must surface as the record errors the replica manager maps to codes."""
    if records is None:
        return
    try:
        for batch in iter_batches(records):
            batch.ensure_valid()
            decode_records(batch)
    except BATCH_ERRORS:
        pass


def decode_produce(ctx) -> list:
    request = decode_produce_request(ctx.api_version, ctx.frame, ctx.body_offset)
    for topic in request.topics:
        for partition in topic.partitions:
            validate_records(partition.records)
    return []


def decode_with_kio(ctx) -> list:
    decode_request(ctx.header.api_key, ctx.api_version, ctx.frame, ctx.body_offset)
    return []


CONTROL_DECODERS = {
    ApiKey.LEADER_AND_ISR: control.decode_leader_and_isr_request,
    ApiKey.UPDATE_METADATA: control.decode_update_metadata_request,
    ApiKey.STOP_REPLICA: control.decode_stop_replica_request,
}


def decode_control(ctx) -> list:
    CONTROL_DECODERS[ctx.header.api_key](ctx.frame, ctx.body_offset)
    return []


async def decode_control_async(ctx) -> list:
    """LeaderAndIsr and StopReplica handlers are coroutines: they decode only once awaited."""
    return decode_control(ctx)


# The body codec each broker handler calls first (see replog/broker/handlers).
BODY_DECODERS = {key: decode_with_kio for key in BROKER_APIS} | {key: decode_control for key in CONTROL_DECODERS}
BODY_DECODERS[ApiKey.PRODUCE] = decode_produce
BODY_DECODERS[ApiKey.LEADER_AND_ISR] = BODY_DECODERS[ApiKey.STOP_REPLICA] = decode_control_async
DISPATCHER = Dispatcher(BODY_DECODERS, lambda: [])


def dispatch_to_completion(dispatcher: Dispatcher, frame: bytearray) -> None:
    """dispatch, then drive a returned coroutine (which ServerConnection would run as a task) to its end."""
    result = dispatcher.dispatch(frame, "fuzz", lambda: None, Session())
    if asyncio.iscoroutine(result):
        try:
            result.send(None)
        except StopIteration:
            return
        result.close()
        raise AssertionError("a decode-only handler suspended")


def decode_as_broker(frame: bytearray) -> None:
    """Decode like the broker; only CloseConnection (the connection closes) may escape."""
    try:
        dispatch_to_completion(DISPATCHER, frame)
    except CloseConnection:
        pass


def assert_bounded_decode(frame: bytearray) -> None:
    tracemalloc.start()
    try:
        decode_as_broker(frame)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= FIXED_ALLOWANCE_BYTES + PER_FRAME_BYTE_ALLOWANCE * len(frame), (peak, bytes(frame).hex())


def vm_peak_kb() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmPeak:"))


@pytest.fixture(scope="module", autouse=True)
def no_native_over_reservation():
    before = vm_peak_kb()
    yield
    assert vm_peak_kb() - before < VM_PEAK_GROWTH_LIMIT_KB


mutations = mutation_lists(max_position=4096, max_data_size=32, max_count=5)


def test_body_decoders_cover_every_advertised_api():
    assert set(BODY_DECODERS) == set(BROKER_APIS)


@pytest.mark.parametrize(("api_key", "version"), ADVERTISED_VERSIONS)
def test_valid_sample_frames_decode(api_key, version):
    """The seeds are valid, so the mutation tests start from frames the decoders accept."""
    dispatch_to_completion(DISPATCHER, bytearray(sample_frame(api_key, version)))


@FUZZ_SETTINGS
@given(frame=st.binary(max_size=512))
def test_random_bytes(frame):
    assert_bounded_decode(bytearray(frame))


@FUZZ_SETTINGS
@given(api=st.sampled_from(ADVERTISED_VERSIONS), body=st.binary(max_size=512))
def test_random_body_after_a_valid_header_prefix(api, body):
    """Random bytes behind the fixed part of a supported header reach the body decoders far more often."""
    api_key, version = api
    assert_bounded_decode(bytearray(sample_frame(api_key, version)[:8]) + body)


@FUZZ_SETTINGS
@given(api=st.sampled_from(ADVERTISED_VERSIONS), edits=mutations)
def test_mutated_valid_requests(api, edits):
    assert_bounded_decode(apply_mutations(sample_frame(*api), edits))


@pytest.mark.parametrize(("api_key", "version"), ADVERTISED_VERSIONS)
def test_hostile_length_at_every_position(api_key, version):
    """Exhaustive over positions: every length and count field of the seed gets every hostile value."""
    frame = sample_frame(api_key, version)
    for position in range(8, len(frame)):
        for hostile in HOSTILE_LENGTHS:
            assert_bounded_decode(apply_mutations(frame, [Mutation("overwrite", position, data=hostile)]))


@FUZZ_SETTINGS
@given(codec=st.sampled_from(sorted(SAMPLE_BATCHES)), edits=mutations, fix_crc=st.booleans())
def test_mutated_record_batches(codec, edits, fix_crc):
    """With the CRC recomputed after mutating, the bytes get past the checksum into the record decoder."""
    batch = apply_mutations(SAMPLE_BATCHES[codec], edits)
    if fix_crc and len(batch) > ATTRIBUTES_OFFSET:
        batch[CRC_OFFSET:ATTRIBUTES_OFFSET] = crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]).to_bytes(4, "big")
    validate_records(memoryview(batch))


# Captured frames: each crashed or over-allocated in the decoder before its fix.
# Metadata v12 whose topics array has compact length 0xffffffff (2**32 - 2 elements): kio reserved 34 GB and
# the Rust allocator aborted the broker process.
METADATA_V12_COMPACT_COUNT_2_POW_32 = bytes.fromhex("0003000c00000007000466757a7a00" "ffffffff0f" "000000000000")
# Metadata v8 whose topics array has int32 length 2**31 - 1: kio reserved 16 GB of address space.
METADATA_V8_LEGACY_COUNT_2_POW_31 = bytes.fromhex("00030008000000070004" "66757a7a" "7fffffff" "000161000000")


def test_captured_hostile_array_counts_are_rejected_before_kio_reserves_memory():
    """In a child process, as the unfixed bug kills the process that decodes the frame."""
    script = (
        "from replog.protocol.headers import decode_request_header\n"
        "from replog.protocol.messages import decode_request\n"
        "from replog.protocol.primitives import DecodeError\n"
        f"for frame in ({METADATA_V12_COMPACT_COUNT_2_POW_32!r}, {METADATA_V8_LEGACY_COUNT_2_POW_31!r}):\n"
        "    header = decode_request_header(frame)\n"
        "    try:\n"
        "        decode_request(header.api_key, header.api_version, frame, header.body_offset)\n"
        "    except DecodeError:\n"
        "        pass\n"
        "    else:\n"
        "        raise SystemExit('decoded a frame whose array cannot fit')\n"
        "print('rejected')\n"
    )
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "RUST_BACKTRACE": "0"})
    assert (child.returncode, child.stdout.strip()) == (0, "rejected"), child.stderr[-2000:]


# ApiVersions v3 with tagged field 5, which its schema lacks: kio raised KeyError, which reached the
# connection's "internal error" branch (logged as a broker failure) instead of a decode error.
API_VERSIONS_V3_UNKNOWN_TAG = bytes.fromhex("0012000300000007000466757a7a00" "0274" "0231" "010500")


def test_captured_unknown_tagged_field_is_a_decode_error():
    with pytest.raises(CloseConnection, match="Unknown tagged field tag: 5"):
        DISPATCHER.dispatch(bytearray(API_VERSIONS_V3_UNKNOWN_TAG), "fuzz", lambda: None, Session())


# LeaderAndIsr v7 whose LiveLeaders count is 0 (null, not allowed): the handler is a coroutine, so the
# DecodeError came out of the awaited task past Dispatcher's check and was logged as an internal error.
LEADER_AND_ISR_V7_NULL_LIVE_LEADERS = bytes.fromhex(
    "0004000700000007000466757a7a00000000010000000001000000000000000100020274000000000000000000000000000000010200"
    "00000000000001000000010000000103000000010000000200000001030000000100000002010100000001904e1702146d696e2e696e"
    "73796e632e7265706c696361730231" "00" "000000010a6c6f63616c686f7374000023840000")


def test_captured_malformed_body_of_an_async_handler_closes_the_connection():
    """Through the real LeaderAndIsr handler: it fails decoding before it touches the broker."""
    dispatcher = Dispatcher({ApiKey.LEADER_AND_ISR: functools.partial(leader_and_isr.handle, control=None)},
                            lambda: [])
    with pytest.raises(CloseConnection, match="null LiveLeaders"):
        dispatch_to_completion(dispatcher, bytearray(LEADER_AND_ISR_V7_NULL_LIVE_LEADERS))


# A one-record batch with compression codec 5 (unassigned) and a CRC that matches: BatchHeader.compression
# raised ValueError out of decode_records, and the leader's validation (CRC only) let it into the log.
BATCH_UNKNOWN_CODEC_5 = bytes.fromhex(
    "000000000000000000000039ffffffff02d89ddc5200050000000000000000000003e800000000000003e8ffffffffffffffff"
    "ffffffffffff000000010e00000001027600")


def test_captured_unknown_compression_codec_is_a_corrupt_batch():
    (batch,) = iter_batches(BATCH_UNKNOWN_CODEC_5)
    with pytest.raises(CorruptRecordError, match="unknown compression codec 5"):
        batch.ensure_valid()
    with pytest.raises(CorruptRecordError, match="unknown compression codec 5"):
        decode_records(batch)


# ListOffsets v1 whose one topic has a null (-1) partitions array, which no version allows: kio decoded it as
# None and the handler's loop over it raised TypeError (live fuzzer, seed 11, ~12,000 frames in).
LIST_OFFSETS_V1_NULL_PARTITIONS = bytes.fromhex(
    "0002000100000007000466757a7a" "00000001" "00000001" "000174" "ffffffff")


def test_captured_null_in_a_non_nullable_array_closes_the_connection():
    with pytest.raises(CloseConnection, match="not nullable"):
        dispatch_to_completion(DISPATCHER, bytearray(LIST_OFFSETS_V1_NULL_PARTITIONS))
