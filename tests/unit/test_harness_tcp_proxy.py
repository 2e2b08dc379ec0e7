"""The chaos suite's fault-injecting TCP proxy: a cut separates exactly the peers it names, refusing or
blackholing their connections, and heal() restores them; everyone else is forwarded throughout."""

import asyncio
import contextlib

import pytest

from replog.harness.tcp_proxy import BLACKHOLE, REFUSE, TcpProxy

# Every 127/8 address is loopback on Linux: each stands for one peer host.
PEER_A = "127.0.0.21"
PEER_B = "127.0.0.22"
ANSWER_TIMEOUT_S = 5.0  # an echo through the proxy on a loaded machine
SILENCE_S = 0.3  # how long a blackholed link is watched for bytes that must not come


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(1024):
            writer.write(data)
            await writer.drain()
    writer.close()


@pytest.fixture
async def proxy():
    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    proxy = await TcpProxy("127.0.0.1", server.sockets[0].getsockname()[1]).start()
    yield proxy
    await proxy.stop()
    server.close()
    await server.wait_closed()


async def connect(proxy: TcpProxy, peer: str):
    return await asyncio.open_connection(proxy.host, proxy.port, local_addr=(peer, 0))


async def answers(connection, payload: bytes) -> bool:
    """Whether the echo comes back through the proxy (False: the connection was closed or reset)."""
    reader, writer = connection
    try:
        writer.write(payload)
        await writer.drain()
        return await asyncio.wait_for(reader.readexactly(len(payload)), ANSWER_TIMEOUT_S) == payload
    except (ConnectionError, asyncio.IncompleteReadError):
        return False


async def is_silent(connection, payload: bytes) -> bool:
    """Whether nothing comes back for SILENCE_S, the connection staying open."""
    reader, writer = connection
    writer.write(payload)
    await writer.drain()
    try:
        await asyncio.wait_for(reader.read(1), SILENCE_S)
    except TimeoutError:
        return True
    return False


async def test_a_refused_peer_loses_its_connections_and_cannot_open_new_ones_until_healed(proxy):
    a, b = await connect(proxy, PEER_A), await connect(proxy, PEER_B)
    assert await answers(a, b"before") and await answers(b, b"before")
    proxy.cut([PEER_A], REFUSE)
    assert proxy.cut_mode(PEER_A) == REFUSE and proxy.cut_mode(PEER_B) is None
    assert not await answers(a, b"during")
    assert not await answers(await connect(proxy, PEER_A), b"new")
    assert await answers(b, b"during")
    proxy.heal([PEER_A])
    assert not proxy.is_cut
    assert await answers(await connect(proxy, PEER_A), b"after")
    assert await answers(b, b"after")


async def test_a_blackholed_peer_keeps_its_sockets_but_nothing_passes_until_healed(proxy):
    a, b = await connect(proxy, PEER_A), await connect(proxy, PEER_B)
    assert await answers(a, b"before")
    proxy.cut([PEER_A], BLACKHOLE)
    assert await is_silent(a, b"held")
    opened_during = await connect(proxy, PEER_A)  # accepted, but not carried through
    assert await is_silent(opened_during, b"waiting")
    assert await answers(b, b"during")
    proxy.heal([PEER_A])
    # The bytes held by the blackhole arrive, on the same sockets, as after TCP retransmission.
    assert await asyncio.wait_for(a[0].readexactly(4), ANSWER_TIMEOUT_S) == b"held"
    assert await asyncio.wait_for(opened_during[0].readexactly(7), ANSWER_TIMEOUT_S) == b"waiting"
    assert await answers(a, b"after")


async def test_a_cut_without_peers_separates_everyone(proxy):
    a, b = await connect(proxy, PEER_A), await connect(proxy, PEER_B)
    proxy.cut()
    assert not await answers(a, b"x") and not await answers(b, b"x")
    proxy.heal()
    assert await answers(await connect(proxy, PEER_A), b"y")
    assert await answers(await connect(proxy, PEER_B), b"y")


async def test_healing_one_peer_keeps_the_others_cut(proxy):
    proxy.cut([PEER_A, PEER_B], REFUSE)
    proxy.heal([PEER_B])
    assert await answers(await connect(proxy, PEER_B), b"x")
    assert not await answers(await connect(proxy, PEER_A), b"x")
