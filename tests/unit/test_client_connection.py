"""Connection against an in-memory transport: pipelining, correlation ids, bounds and version negotiation."""

import asyncio

import pytest

from replog.client.connection import CORRELATION_ID_LIMIT, Connection
from replog.client.errors import KafkaError
from replog.protocol import messages
from replog.protocol.apis import ApiKey
from replog.protocol.frames import FrameDecoder, size_prefix
from replog.protocol.headers import decode_request_header, encode_request_header


class FakeTransport:
    """Records what the connection writes; one writelines call per flush."""

    def __init__(self) -> None:
        self.writes: list[list[bytes]] = []
        self.closed = False

    def writelines(self, parts) -> None:
        assert not self.closed
        self.writes.append([bytes(p) for p in parts])

    def close(self) -> None:
        self.closed = True

    def requests(self):
        decoder = FrameDecoder(1 << 20)
        decoder.feed(b"".join(b"".join(parts) for parts in self.writes))
        frames = []
        while (frame := decoder.next_frame()) is not None:
            frames.append(decode_request_header(frame))
        return frames


def connected(**kwargs) -> tuple[Connection, FakeTransport]:
    conn = Connection("127.0.0.1", 9092, **kwargs)
    transport = FakeTransport()
    conn.connection_made(transport)
    return conn, transport


def respond(
    conn: Connection, correlation_id: int, body: bytes = b"", *, one_byte_at_a_time: bool = False
) -> None:
    data = size_prefix(4 + len(body)) + correlation_id.to_bytes(4, "big", signed=True) + body
    chunks = [data[i : i + 1] for i in range(len(data))] if one_byte_at_a_time else [data]
    for chunk in chunks:
        buffer = conn.get_buffer(-1)
        buffer[: len(chunk)] = chunk
        conn.buffer_updated(len(chunk))


async def settle() -> None:
    # Enough loop turns for woken tasks to pass through wait_for and for the write flush to run.
    for _ in range(10):
        await asyncio.sleep(0)


async def test_pipelined_requests_are_coalesced_and_answered_in_order():
    conn, transport = connected()
    first = asyncio.ensure_future(conn.request(ApiKey.METADATA, 1, [b"one"]))
    second = asyncio.ensure_future(conn.request(ApiKey.METADATA, 1, [b"two", memoryview(b"!")]))
    await settle()
    assert len(transport.writes) == 1  # both requests went out in one writelines call
    assert [h.correlation_id for h in transport.requests()] == [0, 1]
    respond(conn, 0, b"A")
    respond(conn, 1, b"B", one_byte_at_a_time=True)
    assert bytes((await first)[4:]) == b"A"
    assert bytes((await second)[4:]) == b"B"
    assert conn.in_flight_count == 0


async def test_correlation_id_mismatch_closes_the_connection():
    conn, transport = connected()
    first = asyncio.ensure_future(conn.request(ApiKey.METADATA, 1, [b"x"]))
    second = asyncio.ensure_future(conn.request(ApiKey.METADATA, 1, [b"y"]))
    await settle()
    respond(conn, 1)  # answers the second request first: the stream is out of sync
    for task in (first, second):
        with pytest.raises(KafkaError) as exc:
            await task
        assert exc.value.name == "NETWORK_EXCEPTION"
    assert "out of sync" in str(exc.value)
    assert conn.closed and transport.closed
    with pytest.raises(KafkaError):
        await conn.request(ApiKey.METADATA, 1, [b"z"])


async def test_unsolicited_response_closes_the_connection():
    conn, transport = connected()
    respond(conn, 0)
    assert conn.closed and transport.closed


async def test_correlation_ids_wrap_at_2_31():
    conn, transport = connected()
    conn._next_correlation_id = CORRELATION_ID_LIMIT - 1
    tasks = [asyncio.ensure_future(conn.request(ApiKey.METADATA, 1, [b""])) for _ in range(2)]
    await settle()
    assert [h.correlation_id for h in transport.requests()] == [CORRELATION_ID_LIMIT - 1, 0]
    respond(conn, CORRELATION_ID_LIMIT - 1)
    respond(conn, 0)
    await asyncio.gather(*tasks)


async def test_in_flight_requests_are_bounded():
    conn, transport = connected(max_in_flight=2)
    tasks = [asyncio.ensure_future(conn.request(ApiKey.METADATA, 1, [b"%d" % i])) for i in range(3)]
    await settle()
    assert len(transport.requests()) == 2
    respond(conn, 0)
    await settle()
    assert len(transport.requests()) == 3
    respond(conn, 1)
    respond(conn, 2)
    await asyncio.gather(*tasks)


async def test_request_timeout_fails_and_closes():
    conn, transport = connected()
    with pytest.raises(KafkaError) as exc:
        await conn.request(ApiKey.METADATA, 1, [b"x"], timeout_ms=20)
    assert exc.value.name == "REQUEST_TIMED_OUT"
    assert exc.value.retriable
    assert conn.closed and transport.closed


async def test_request_without_response_is_not_tracked():
    conn, transport = connected()
    assert await conn.request(ApiKey.PRODUCE, 7, [b"records"], expect_response=False) is None
    await settle()
    assert conn.in_flight_count == 0
    assert len(transport.requests()) == 1


async def test_api_versions_falls_back_to_the_v0_reply():
    conn, transport = connected()
    negotiation = asyncio.ensure_future(conn.negotiate_versions())
    await settle()
    (header,) = transport.requests()
    assert (header.api_key, header.api_version) == (ApiKey.API_VERSIONS, 3)
    body = messages.encode_response(
        ApiKey.API_VERSIONS,
        0,
        {
            "error_code": 35,
            "api_keys": [
                {"api_key": 18, "min_version": 0, "max_version": 2},
                {"api_key": 0, "min_version": 0, "max_version": 7},
                {"api_key": 1, "min_version": 0, "max_version": 16},
            ],
        },
    )
    respond(conn, header.correlation_id, body)
    await negotiation
    assert conn.api_versions[ApiKey.PRODUCE] == (0, 7)
    assert conn.pick_version(ApiKey.PRODUCE) == 7  # broker max below ours
    assert conn.pick_version(ApiKey.FETCH) == 12  # ours below the broker's


def test_pick_version_rejects_missing_or_disjoint_ranges():
    conn = Connection("127.0.0.1", 9092)
    conn.api_versions = {ApiKey.FETCH: (13, 16), ApiKey.PRODUCE: (0, 2)}
    for key in (ApiKey.FETCH, ApiKey.PRODUCE, ApiKey.METADATA):
        with pytest.raises(KafkaError) as exc:
            conn.pick_version(key)
        assert exc.value.name == "UNSUPPORTED_VERSION"


async def test_an_answer_reaches_the_caller_one_loop_turn_after_its_frame():
    """A follower's fetch loop runs on from its answer in the turn after the frame arrives, not two."""
    conn, _ = connected()
    pending = asyncio.ensure_future(conn.request(ApiKey.METADATA, 12, [b""]))
    await settle()  # sent, waiting for its answer
    respond(conn, 0, b"answer")
    await asyncio.sleep(0)  # one loop turn
    assert pending.done(), "the answer did not reach the caller in one loop turn"
    assert bytes(pending.result()[4:]) == b"answer"


async def test_a_request_sent_with_flush_is_written_before_the_loop_turns():
    """A follower's next fetch leaves in the call that makes it: no loop turn (and the I/O it serves first)
    between its append and its next request on the acks=all path (docs/profiles/rf3-linger0.md)."""
    conn, transport = connected()
    pending = asyncio.ensure_future(conn.request(ApiKey.FETCH, 12, [b"fetch"], flush=True))
    await asyncio.sleep(0)  # the task runs up to its wait for the answer; a flush scheduled meanwhile has not run
    assert [h.correlation_id for h in transport.requests()] == [0], "the request waited for a loop turn"
    respond(conn, 0, b"answer")
    assert bytes((await pending)[4:]) == b"answer"


async def test_a_flushed_request_takes_the_requests_queued_before_it_in_order():
    conn, transport = connected()
    first = asyncio.ensure_future(conn.request(ApiKey.METADATA, 1, [b"one"]))
    second = asyncio.ensure_future(conn.request(ApiKey.FETCH, 12, [b"two"], flush=True))
    await asyncio.sleep(0)
    assert len(transport.writes) == 1  # the flush wrote both, in the order they were made
    assert [h.correlation_id for h in transport.requests()] == [0, 1]
    await settle()
    assert len(transport.writes) == 1  # the flush scheduled for the first found nothing left
    respond(conn, 0)
    respond(conn, 1)
    await asyncio.gather(first, second)


@pytest.mark.parametrize(("api_key", "version"), [(ApiKey.FETCH, 12), (ApiKey.METADATA, 1), (ApiKey.PRODUCE, 9)])
async def test_each_request_frame_is_the_size_the_header_encoding_and_the_body(api_key, version):
    """The header's ends are encoded once per (api key, version); every frame still carries exactly
    encode_request_header's bytes for its own correlation id, whether flexible (header v2) or not."""
    conn, transport = connected(client_id="follower-3")
    conn._next_correlation_id = 2**24 + 5
    for body in (b"first", b"second body"):
        asyncio.ensure_future(conn.request(api_key, version, [body, memoryview(b"!")], flush=True))
    await settle()
    expected = b""
    for correlation_id, body in ((2**24 + 5, b"first"), (2**24 + 6, b"second body")):
        header = encode_request_header(api_key, version, correlation_id, "follower-3")
        expected += size_prefix(len(header) + len(body) + 1) + header + body + b"!"
    assert b"".join(b"".join(parts) for parts in transport.writes) == expected
    assert [len(parts) for parts in transport.writes] == [3, 3]  # size and header in one buffer, then the body
    conn.close()
