"""Completion: a delayed answer's steps run in the call that completes it, and the connection writes the answer
one event-loop turn later (server/completion.py)."""

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
