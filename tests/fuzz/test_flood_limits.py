"""Floods against a real broker process, each proving one limit is enforced and the broker keeps serving.

Kafka's SocketServer is the model: max.connections bounds the connections a listener holds, a channel is
muted while its requests are outstanding (replog allows max.inflight.requests.per.connection of them, then
stops reading), a size prefix above socket.request.max.bytes closes the connection (InvalidReceiveException)
before anything is allocated, and connections.max.idle.ms closes connections that went quiet, a half-sent
frame included. Every wait is on a condition or a socket timeout, with bounds generous for a loaded machine.
"""

import socket
import struct
import threading
import time

import pytest
from kio.schema.errors import ErrorCode

from replog.harness.broker_process import BrokerProcess
from replog.protocol.apis import ApiKey
from replog.protocol.frames import size_prefix
from replog.protocol.headers import encode_request_header
from replog.protocol.messages import encode_request
from tests.fuzz.test_live_broker_fuzz import vm_rss_kb
from tests.integration.test_bad_input import assert_broker_alive, create_topic
from tests.raw_wire import RawConnection

CLOSE_BOUND_S = 15.0  # a close the broker owes us arrives well within this, even on a loaded machine


def start_broker(tmp_path, overrides: dict[str, str]) -> BrokerProcess:
    process = BrokerProcess(tmp_path / "logs", output=tmp_path / "broker.out", overrides=overrides)
    process.start()
    return process


@pytest.fixture
def broker_with(tmp_path):
    """Start a broker with the given overrides; every one started is stopped."""
    started = []

    def start(**overrides: str) -> BrokerProcess:
        process = start_broker(tmp_path / str(len(started)), {k.replace("_", "."): v for k, v in overrides.items()})
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


def closed_by_broker(sock: socket.socket, timeout_s: float = CLOSE_BOUND_S) -> bool:
    """Waits for EOF or a reset; False if the connection is still open after timeout_s."""
    sock.settimeout(timeout_s)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def api_versions_frame(correlation_id: int) -> bytes:
    payload = encode_request_header(ApiKey.API_VERSIONS, 0, correlation_id, "flood")
    return size_prefix(len(payload)) + payload


def eventually(action, timeout_s: float = CLOSE_BOUND_S):
    """The first result of `action` that raises no OSError or AssertionError, retried until timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return action()
        except (OSError, AssertionError):
            if time.monotonic() > deadline:
                raise


def test_connections_beyond_max_connections_are_closed_and_the_broker_still_serves(broker_with):
    broker = broker_with(max_connections="20")
    held = [RawConnection(broker.port) for _ in range(20)]
    for conn in held:  # each has been admitted once it answers
        conn.call(ApiKey.API_VERSIONS, 0, b"")
    extras = [RawConnection(broker.port) for _ in range(10)]
    assert all(closed_by_broker(conn.sock) for conn in extras)
    for conn in held:
        conn.call(ApiKey.API_VERSIONS, 0, b"")
    for conn in extras + held[:5]:
        conn.close()
    eventually(lambda: assert_broker_alive(broker.port))  # a freed slot admits a new connection
    for conn in held[5:]:
        conn.close()


def test_pipelined_requests_beyond_max_inflight_are_taken_in_waves_and_answered_in_order(broker_with):
    """Parked fetches hold their slots: with 4 allowed, 12 pipelined fetches waiting 1 s each need three
    rounds, so the broker cannot have read past the fourth before the first answers came back."""
    broker = broker_with(max_inflight_requests_per_connection="4")
    conn = RawConnection(broker.port, timeout=60)
    create_topic(conn, "empty")
    body = encode_request(ApiKey.FETCH, 12, {
        "replica_id": -1, "max_wait": 1000, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "topics": [{"topic": "empty", "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
            "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""})
    started = time.monotonic()
    sent = [conn.send_request(ApiKey.FETCH, 12, body) for _ in range(12)]
    answered = [struct.unpack_from(">i", conn.receive_frame())[0] for _ in sent]
    elapsed = time.monotonic() - started
    conn.close()
    assert answered == sent
    assert elapsed >= 2.9, f"12 parked fetches answered in {elapsed:.2f} s: more than 4 were in flight"


def test_a_flood_of_pipelined_requests_is_answered_completely_and_in_order(broker_with):
    """The client writes 20,000 requests before reading; the broker's reads stall when its writes do, and
    every answer still comes back, in order."""
    broker = broker_with(max_inflight_requests_per_connection="8")
    count = 20_000
    flood = b"".join(api_versions_frame(i) for i in range(count))
    with socket.create_connection(("127.0.0.1", broker.port), timeout=60) as sock:
        sender = threading.Thread(target=sock.sendall, args=(flood,), daemon=True)
        sender.start()
        reader = sock.makefile("rb")
        for expected in range(count):
            (size,) = struct.unpack(">i", reader.read(4))
            response = reader.read(size)
            assert struct.unpack_from(">ih", response) == (expected, ErrorCode.none.value)
        sender.join(timeout=60)
        reader.close()
    assert_broker_alive(broker.port)


def test_size_prefix_over_socket_request_max_bytes_closes_without_allocating(broker_with):
    """100 connections each announce a frame one byte over the limit: all are closed, and RSS shows no
    frame-sized allocation (100 of them would be 100 MiB)."""
    broker = broker_with(socket_request_max_bytes=str(1 << 20))
    assert_broker_alive(broker.port)
    rss_before = vm_rss_kb(broker.proc.pid)
    socks = [socket.create_connection(("127.0.0.1", broker.port), timeout=CLOSE_BOUND_S) for _ in range(100)]
    for sock in socks:
        sock.sendall(struct.pack(">i", (1 << 20) + 1) + b"\x00" * 8)
    assert all(closed_by_broker(sock) for sock in socks)
    assert vm_rss_kb(broker.proc.pid) - rss_before < 16 * 1024
    for sock in socks:
        sock.close()
    assert_broker_alive(broker.port)


def test_partial_frames_claiming_the_limit_hold_only_what_arrived(broker_with):
    """100 connections each announce a 1 MiB frame (allowed) and send 16 bytes of it. Memory follows the
    bytes received, not the size prefix: 100 MiB before the fix, a few MiB of staging buffers after."""
    broker = broker_with(socket_request_max_bytes=str(1 << 20))
    assert_broker_alive(broker.port)
    rss_before = vm_rss_kb(broker.proc.pid)
    socks = [socket.create_connection(("127.0.0.1", broker.port), timeout=CLOSE_BOUND_S) for _ in range(100)]
    try:
        for sock in socks:
            sock.sendall(struct.pack(">i", 1 << 20) + struct.pack(">hhi", ApiKey.PRODUCE, 9, 1) + b"\x00" * 8)
        assert_broker_alive(broker.port)  # every partial frame has been read: the loop took a new request
        assert vm_rss_kb(broker.proc.pid) - rss_before < 32 * 1024
    finally:
        for sock in socks:
            sock.close()


def test_partial_frames_are_closed_after_connections_max_idle_ms(broker_with):
    broker = broker_with(connections_max_idle_ms="1000")
    socks = [socket.create_connection(("127.0.0.1", broker.port), timeout=CLOSE_BOUND_S) for _ in range(20)]
    started = time.monotonic()
    for sock in socks:
        sock.sendall(struct.pack(">i", 100) + b"\x00" * 10)  # 10 of the 100 bytes announced
    assert all(closed_by_broker(sock) for sock in socks)
    assert time.monotonic() - started >= 0.9  # closed for idleness, not for the bytes themselves
    for sock in socks:
        sock.close()
    assert_broker_alive(broker.port)


def test_a_connection_waiting_on_a_parked_request_is_not_idle(broker_with):
    """A fetch parked for 2.5 s on a connection with a 1 s idle limit still gets its answer."""
    broker = broker_with(connections_max_idle_ms="1000")
    conn = RawConnection(broker.port, timeout=30)
    create_topic(conn, "quiet")
    fetch = conn.call(ApiKey.FETCH, 12, {
        "replica_id": -1, "max_wait": 2500, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "topics": [{"topic": "quiet", "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
            "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""})
    assert fetch.responses[0].partitions[0].error_code == ErrorCode.none
    assert closed_by_broker(conn.sock)  # and once answered and quiet, it is idle
    conn.close()


@pytest.mark.parametrize("partitions", [[2**31 - 1], [5000, 5001]])
def test_create_topics_over_the_partition_cap_is_a_policy_violation(broker_with, partitions):
    """Found probing what the fuzzer reached: num_partitions 2**31 - 1 stalled the broker's event loop."""
    broker = broker_with()
    conn = RawConnection(broker.port, timeout=30)
    response = conn.call(ApiKey.CREATE_TOPICS, 7, {
        "topics": [{"name": f"huge-{i}", "num_partitions": n, "replication_factor": 1, "assignments": [],
                    "configs": []} for i, n in enumerate(partitions)], "timeout": 5000, "validate_only": True})
    assert [t.error_code for t in response.topics] == [ErrorCode.policy_violation] * len(partitions)
    conn.close()
    assert_broker_alive(broker.port)
