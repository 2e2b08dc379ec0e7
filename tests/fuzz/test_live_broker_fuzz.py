"""Random and mutated frames against a real broker process, one connection each.

Each frame is followed on its connection by an ApiVersions sentinel with a correlation id the fuzz frame
cannot carry, so a request that rightly gets no answer (Produce with acks=0) still ends in a reply. Per
frame the broker must, within RESPONSE_BOUND_S, either answer (the fuzz frame's correlation id first, in a
response that decodes, then the sentinel) or close the connection. Frames whose size prefix is itself
mutated are sent without waiting: a prefix claiming more bytes than follow is a partial frame the broker
rightly waits on (connections.max.idle.ms closes those; see test_flood_limits.py). After the flood the
process must be alive, serve ApiVersions and a produce + fetch round trip, and its RSS must not have grown
past RSS_GROWTH_LIMIT_KB.

REPLOG_LIVE_FUZZ_FRAMES sets the count (CI: 3000), REPLOG_LIVE_FUZZ_SEED the seed.
"""

import os
import random
import socket
import struct
import time

import pytest
from kio.schema.errors import ErrorCode

from replog.harness.broker_process import BrokerProcess
from replog.protocol import control
from replog.protocol.apis import SUPPORTED_APIS, ApiKey, response_header_version
from replog.protocol.frames import size_prefix
from replog.protocol.headers import decode_response_header, encode_request_header
from replog.protocol.messages import decode_response, encode_request
from replog.protocol.records import build_batch
from tests.fuzz.corpus import ADVERTISED_VERSIONS, apply_mutations, random_mutations, sample_frame
from tests.fuzz.test_decoder_fuzz import BATCH_UNKNOWN_CODEC_5
from tests.integration.test_bad_input import assert_broker_alive, create_topic, produce
from tests.raw_wire import RawConnection

FRAMES = int(os.environ.get("REPLOG_LIVE_FUZZ_FRAMES", "3000"))
SEED = int(os.environ.get("REPLOG_LIVE_FUZZ_SEED", "20261122"))
RESPONSE_BOUND_S = 5.0
# Seeds carry correlation id 7; a mutation turning that into this one would take a rare exact overwrite.
SENTINEL_CORRELATION_ID = -7
SENTINEL = encode_request_header(ApiKey.API_VERSIONS, 0, SENTINEL_CORRELATION_ID, "sentinel")
# Headroom over the warmed-up broker: fuzzed CreateTopics may create topics (each an open log with its
# indexes mapped) and the allocator keeps freed arenas; a leak per frame would show as tens of MB or more.
RSS_GROWTH_LIMIT_KB = 96 * 1024
CONTROL_RESPONSE_DECODERS = {
    ApiKey.LEADER_AND_ISR: control.decode_leader_and_isr_response,
    ApiKey.UPDATE_METADATA: control.decode_update_metadata_response,
    ApiKey.STOP_REPLICA: control.decode_stop_replica_response,
}


@pytest.fixture
def fuzz_broker(tmp_path):
    # A 1 MiB request limit keeps a fuzzed size prefix from making the broker allocate 100 MiB frames;
    # auto topic creation stays off so metadata requests do not create a topic per mutated name.
    process = BrokerProcess(tmp_path / "logs", output=tmp_path / "broker.out", overrides={
        "socket.request.max.bytes": str(1 << 20), "auto.create.topics.enable": "false"})
    process.start()
    try:
        yield process
    finally:
        process.stop()


def vm_rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def receive_exactly(sock: socket.socket, n: int) -> bytes | None:
    """n bytes, or None if the peer closed first."""
    chunks = []
    while n:
        try:
            chunk = sock.recv(n)
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def receive_frame(sock: socket.socket) -> bytes | None:
    head = receive_exactly(sock, 4)
    return None if head is None else receive_exactly(sock, int.from_bytes(head, "big"))


def assert_well_formed(response: bytes, frame: bytes) -> None:
    api_key, version, correlation_id = struct.unpack_from(">hhi", frame)
    got, offset = decode_response_header(response, response_header_version(api_key, version)
                                         if SUPPORTED_APIS[api_key].supports(version) else 0)
    assert got == correlation_id, f"answer to {frame.hex()} carries correlation id {got}"
    if not SUPPORTED_APIS[api_key].supports(version):
        return  # KIP-511's ApiVersions v0 fallback; test_bad_input checks its body
    if api_key in CONTROL_RESPONSE_DECODERS:
        CONTROL_RESPONSE_DECODERS[api_key](response, offset)
    else:
        decode_response(api_key, version, response, offset)


def exchange(port: int, frame: bytes) -> str:
    """Send one fuzz frame and the sentinel; 'answered' or 'closed', or fail on a hang or a bad answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=RESPONSE_BOUND_S) as sock:
        try:
            sock.sendall(size_prefix(len(frame)) + frame + size_prefix(len(SENTINEL)) + SENTINEL)
        except (BrokenPipeError, ConnectionResetError):
            return "closed"
        try:
            first = receive_frame(sock)
            if first is None:
                return "closed"
            if first[:4] != struct.pack(">i", SENTINEL_CORRELATION_ID):
                assert_well_formed(first, frame)
                if receive_frame(sock) is None:
                    return "closed"  # e.g. a SaslHandshake: only SaslAuthenticate may follow it
            return "answered"
        except TimeoutError:
            pytest.fail(f"no answer and no close within {RESPONSE_BOUND_S}s for frame {frame.hex()}")


def send_with_mutated_prefix(port: int, frame: bytes, rng: random.Random) -> None:
    prefix = bytearray(size_prefix(len(frame)))
    prefix[rng.randrange(4)] ^= 1 << rng.randrange(8)
    with socket.create_connection(("127.0.0.1", port), timeout=RESPONSE_BOUND_S) as sock:
        try:
            sock.sendall(bytes(prefix) + frame)
        except (BrokenPipeError, ConnectionResetError):
            pass


def fuzz_frame(rng: random.Random) -> tuple[bytes, bool]:
    """(frame, mutate its size prefix too)."""
    roll = rng.random()
    if roll < 0.1:
        return rng.randbytes(rng.randint(0, 64)), False
    api_key, version = rng.choice(ADVERTISED_VERSIONS)
    frame = sample_frame(api_key, version)
    if roll < 0.15:
        return frame, False
    return bytes(apply_mutations(frame, random_mutations(rng, len(frame)))), roll > 0.97


def round_trip_still_works(port: int) -> None:
    conn = RawConnection(port)
    try:
        create_topic(conn, "after-fuzz")
        written = produce(conn, "after-fuzz", 0, bytearray(build_batch([(None, b"still here", [], 1000)])))
        assert written.error_code == ErrorCode.none
        fetch = conn.call(ApiKey.FETCH, 12, encode_request(ApiKey.FETCH, 12, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": "after-fuzz", "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": written.base_offset,
                "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}))
        partition = fetch.responses[0].partitions[0]
        assert partition.error_code == ErrorCode.none
        assert b"still here" in partition.records
    finally:
        conn.close()


def test_broker_survives_random_and_mutated_frames(fuzz_broker):
    rng = random.Random(SEED)
    port, pid = fuzz_broker.port, fuzz_broker.proc.pid
    assert_broker_alive(port)
    rss_before = vm_rss_kb(pid)
    outcomes = {"answered": 0, "closed": 0, "prefix mutated": 0}
    started = time.monotonic()
    for _ in range(FRAMES):
        frame, mutate_prefix = fuzz_frame(rng)
        if mutate_prefix:
            send_with_mutated_prefix(port, frame, rng)
            outcomes["prefix mutated"] += 1
        else:
            outcomes[exchange(port, frame)] += 1
        assert fuzz_broker.proc.poll() is None, f"broker died on frame {frame.hex()}:\n{fuzz_broker.output_tail()}"
    elapsed = time.monotonic() - started
    assert_broker_alive(port)
    round_trip_still_works(port)
    rss_growth = vm_rss_kb(pid) - rss_before
    print(f"\nlive fuzz: seed {SEED}, {FRAMES} frames in {elapsed:.1f}s: {outcomes}; RSS +{rss_growth} KB")
    assert sum(outcomes.values()) == FRAMES
    assert outcomes["answered"] > FRAMES // 20  # the seeds reach the handlers, not only the decoders
    assert rss_growth < RSS_GROWTH_LIMIT_KB
    assert "Traceback" not in (fuzz_broker.output.read_text(errors="replace")), fuzz_broker.output_tail(60)


def test_produce_with_an_unknown_compression_codec_is_corrupt_message(fuzz_broker):
    """Found by the decoder fuzzer: the leader checked only the CRC and stored a batch no consumer could read."""
    conn = RawConnection(fuzz_broker.port)
    try:
        create_topic(conn, "codecs")
        assert produce(conn, "codecs", 0, bytearray(BATCH_UNKNOWN_CODEC_5)).error_code == ErrorCode.corrupt_message
        good = produce(conn, "codecs", 0, bytearray(build_batch([(None, b"fine", [], 1000)])))
        assert (good.error_code, good.base_offset) == (ErrorCode.none, 0)  # nothing was appended before it
    finally:
        conn.close()
