"""In-process checks of the limits added for hostile peers: the frame decoder's memory follows the bytes
received rather than the size prefix (beyond the server's receive budget, which size prefixes claim up
to its bound and give back when their connection goes), and a ServerConnection closes after connections.max.idle.ms of quiet
unless it owes the peer an answer."""

import asyncio
import struct
import tracemalloc

from replog.protocol.apis import ApiKey
from replog.protocol.frames import STAGING_BYTES, FrameDecoder, size_prefix
from replog.protocol.headers import encode_request_header
from replog.server.connection import ConnectionHolder
from replog.server.dispatch import Dispatcher
from replog.server.listener import listen
from tests.conditions import wait_until

LIMIT = 100 * 1024 * 1024  # socket.request.max.bytes' default


def test_a_size_prefix_alone_does_not_allocate_the_frame():
    tracemalloc.start()
    try:
        decoder = FrameDecoder(LIMIT)
        decoder.feed(size_prefix(LIMIT) + b"\x00" * 16)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * STAGING_BYTES  # the staging buffer and the frame's first one, not 100 MiB


def test_a_large_frame_grows_with_its_bytes_and_arrives_whole():
    payload = bytes(range(256)) * 20_000  # 5 MB: several growth steps from the first staging-sized buffer
    decoder = FrameDecoder(LIMIT)
    data = size_prefix(len(payload)) + payload
    quarter = len(data) // 4
    decoder.feed(data[:quarter])
    assert decoder.next_frame() is None
    assert len(decoder.get_buffer()) < len(data) - quarter  # not yet sized for the whole frame
    for start in range(quarter, len(data), 70_000):
        decoder.feed(data[start : start + 70_000])
    assert decoder.next_frame() == payload


async def serve(idle_timeout_ms: int | None, handlers: dict,
                holder: ConnectionHolder | None = None) -> tuple[asyncio.AbstractServer, ConnectionHolder]:
    holder = holder or ConnectionHolder(max_connections=10)
    dispatcher = Dispatcher(handlers, lambda: [])
    server = await listen("127.0.0.1", 0, holder, dispatcher, max_frame_bytes=1 << 20, max_inflight=4,
                          use_sendfile=False, idle_timeout_ms=idle_timeout_ms)
    return server, holder


async def test_a_quiet_connection_with_half_a_frame_is_closed_after_the_idle_time():
    server, _ = await serve(100, {})
    reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
    loop = asyncio.get_running_loop()
    started = loop.time()
    writer.write(struct.pack(">i", 50) + b"\x00" * 10)
    assert await asyncio.wait_for(reader.read(1), timeout=10) == b""
    assert loop.time() - started >= 0.09
    writer.close()
    server.close()


async def test_an_answer_owed_keeps_the_connection_open_past_the_idle_time():
    answer = asyncio.get_running_loop().create_future()

    def parked(ctx):
        return answer  # answered once the test says so, like a parked fetch

    server, holder = await serve(100, {ApiKey.METADATA: parked})
    reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
    request = encode_request_header(ApiKey.METADATA, 12, 5, "t")
    writer.write(size_prefix(len(request)) + request)
    await asyncio.sleep(0.5)  # the subject is time passing: five idle periods go by with the answer owed
    assert len(holder.connections) == 1
    answer.set_result([b""])
    response = await asyncio.wait_for(reader.readexactly(9), timeout=10)  # size, header v1, empty body
    assert struct.unpack_from(">ii", response) == (5, 5)
    assert await asyncio.wait_for(reader.read(1), timeout=10) == b""  # then quiet, then closed
    writer.close()
    server.close()


async def test_size_prefixes_claim_no_more_than_the_receive_budget_and_a_closed_connection_gives_its_share_back():
    holder = ConnectionHolder(max_connections=10, receive_budget_bytes=2_000_000)
    server, _ = await serve(None, {}, holder)
    port = server.sockets[0].getsockname()[1]
    peers = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
    for _, writer in peers:
        writer.write(size_prefix(900_000) + b"\x00" * 100)  # a large frame's first bytes, then quiet
    await wait_until(lambda: len(holder.connections) == 3, "three connections")
    # Two frames fit the budget and are allocated whole; the third grows with its bytes instead.
    await wait_until(lambda: holder.receive_budget.reserved == 1_800_000, "two frames claiming the budget")
    for _, writer in peers:
        writer.close()
    await wait_until(lambda: not holder.connections, "the connections closed")
    assert holder.receive_budget.reserved == 0
    server.close()
