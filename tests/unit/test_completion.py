"""Completion: a delayed answer's steps run in the call that completes it, and the connection writes the answer
in that same call, with no event-loop turn in between (server/completion.py)."""

import asyncio
import struct

import pytest

from replog.protocol.apis import ApiKey
from replog.protocol.frames import size_prefix
from replog.protocol.headers import encode_request_header
from replog.server.completion import Completion
from replog.server.connection import ConnectionHolder
from replog.server.dispatch import Dispatcher
from replog.server.listener import listen
from tests.conditions import wait_until


def test_steps_run_in_the_call_that_supplies_the_value():
    seen = []
    completion = Completion().then(lambda v: v + 1).then(lambda v: seen.append(v) or v * 10)
    assert not completion.done()
    assert completion.set_result(1)
    assert seen == [2]
    assert completion.result() == 20


def test_a_step_queued_after_the_value_runs_at_once():
    completion = Completion()
    completion.set_result(2)
    assert completion.then(lambda v: v * 3).result() == 6


def test_the_first_value_stands():
    completion = Completion()
    assert completion.set_result("first")
    assert not completion.set_result("second")
    assert completion.result() == "first"


def test_a_failing_step_fails_the_result_not_the_caller_that_supplied_the_value():
    later = []
    completion = Completion().then(lambda v: 1 / v).then(later.append)
    completion.set_result(0)  # does not raise: the caller is another request's code path
    assert completion.done() and later == []
    with pytest.raises(ZeroDivisionError):
        completion.result()


def test_result_before_the_value_is_an_error():
    with pytest.raises(asyncio.InvalidStateError):
        Completion().result()


def test_the_listener_hears_the_final_value_in_the_call_that_supplies_it():
    heard = []
    completion = Completion().then(lambda v: v * 2)
    completion.on_done(lambda c: heard.append(c.result()))
    assert heard == []
    completion.set_result(21)
    assert heard == [42]


def test_a_listener_added_after_the_value_hears_it_at_once():
    heard = []
    completion = Completion()
    completion.set_result("here")
    completion.on_done(lambda c: heard.append(c.result()))
    assert heard == ["here"]


def test_the_listener_hears_a_failed_step():
    heard = []
    completion = Completion().then(lambda v: 1 / v)
    completion.on_done(heard.append)
    completion.set_result(0)
    assert heard == [completion]
    with pytest.raises(ZeroDivisionError):
        completion.result()


async def test_awaiting_gives_the_final_value():
    completion = Completion().then(str)
    asyncio.get_running_loop().call_soon(completion.set_result, 7)
    assert await completion == "7"


async def test_awaiting_a_failed_one_raises_its_error():
    completion = Completion().then(lambda v: v["missing"])
    completion.set_result({})
    with pytest.raises(KeyError):
        await completion


async def test_a_delayed_answer_is_written_one_loop_turn_after_its_completion():
    """A coroutine awaiting the value wakes one turn after it arrives and its task's end reaches the connection
    one turn after that; a Completion's framed answer reaches the connection in the first turn."""
    pending: list[Completion] = []

    def parked(ctx):
        pending.append(Completion())
        return pending[-1].then(lambda body: body + [b"!"])  # a handler's encoding step

    holder = ConnectionHolder(max_connections=10)
    server = await listen("127.0.0.1", 0, holder, Dispatcher({ApiKey.METADATA: parked}, lambda: []),
                          max_frame_bytes=1 << 20, max_inflight=4, use_sendfile=False, idle_timeout_ms=60_000)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
    try:
        request = encode_request_header(ApiKey.METADATA, 12, 5, "t")
        writer.write(size_prefix(len(request)) + request)
        await wait_until(lambda: pending, "the handler to park the request")  # it comes over loopback
        (connection,) = holder.connections
        assert not connection.idle.is_set()  # it owes an answer
        pending[0].set_result([b"body"])
        await asyncio.sleep(0)  # one loop turn
        assert connection.idle.is_set(), "the answer is not written after one loop turn"
        response = await asyncio.wait_for(reader.readexactly(4 + 4 + 1 + 5), timeout=10)
        assert struct.unpack_from(">ii", response) == (10, 5)  # size, correlation id
        assert response[-5:] == b"body!"
    finally:
        writer.close()
        server.close()


async def _parking_server(max_inflight: int):
    """A server whose Metadata handler parks every request on a Completion the test supplies."""
    pending: list[Completion] = []

    def parked(ctx):
        pending.append(Completion())
        return pending[-1].then(lambda body: body + [b"!"])

    holder = ConnectionHolder(max_connections=10)
    server = await listen("127.0.0.1", 0, holder, Dispatcher({ApiKey.METADATA: parked}, lambda: []),
                          max_frame_bytes=1 << 20, max_inflight=max_inflight, use_sendfile=False,
                          idle_timeout_ms=60_000)
    return server, holder, pending


def _metadata_request(correlation_id: int) -> bytes:
    request = encode_request_header(ApiKey.METADATA, 12, correlation_id, "t")
    return size_prefix(len(request)) + request


async def test_a_delayed_answer_is_written_in_the_call_that_completes_it():
    """No loop turn between the purgatory completing a request (inside an append or a follower's fetch) and
    the answer's write: each turn first serves the other I/O that is ready. One turn on the old future path."""
    server, holder, pending = await _parking_server(max_inflight=4)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
    try:
        writer.write(_metadata_request(5))
        await wait_until(lambda: pending, "the handler to park the request")
        (connection,) = holder.connections
        assert not connection.idle.is_set()
        pending[0].set_result([b"body"])
        assert connection.idle.is_set(), "the answer waits for a loop turn"
        response = await asyncio.wait_for(reader.readexactly(4 + 4 + 1 + 5), timeout=10)
        assert struct.unpack_from(">ii", response) == (10, 5)
        assert response[-5:] == b"body!"
    finally:
        writer.close()
        server.close()


async def test_a_connection_full_of_parked_requests_takes_the_next_one_after_an_answer():
    """At max_inflight the connection stops reading; an answer written from inside another request's call
    resumes it, and the request that waited in the buffer is dispatched on a loop callback of its own."""
    server, holder, pending = await _parking_server(max_inflight=1)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
    try:
        writer.write(_metadata_request(1) + _metadata_request(2))
        await wait_until(lambda: pending, "the first request to park")
        pending[0].set_result([b"one"])
        assert len(pending) == 1, "the next request was dispatched inside the completing call"
        await wait_until(lambda: len(pending) == 2, "the second request to be dispatched")
        pending[1].set_result([b"two"])
        first = await asyncio.wait_for(reader.readexactly(4 + 4 + 1 + 4), timeout=10)
        second = await asyncio.wait_for(reader.readexactly(4 + 4 + 1 + 4), timeout=10)
        assert (struct.unpack_from(">i", first, 4)[0], first[-4:]) == (1, b"one!")
        assert (struct.unpack_from(">i", second, 4)[0], second[-4:]) == (2, b"two!")
    finally:
        writer.close()
        server.close()
