"""A TCP proxy that can cut the links it carries: the network fault of the cluster tests.

Each accepted connection is piped to the target in both directions. A cut applies to every peer or to the
peers (source addresses) it names, so a proxy in front of a broker can separate it from one other broker
while clients and the third broker still reach it. Two kinds of cut:

- REFUSE: every piped connection from a cut peer is reset, and new ones are accepted and closed at once,
  as a peer behind a dead link looks to a client with connect timeouts;
- BLACKHOLE: nothing is forwarded any more, in either direction, but every socket stays open, as when a
  link silently drops packets: the sender's requests time out instead of failing fast. A new connection is
  accepted and left waiting. `heal()` lets the held bytes through again, as TCP retransmission would.

A broker whose controller address points at such a proxy can be partitioned from the controller while
clients and other brokers still reach it: the fault behind a zombie leader (KIP-101's divergence scenario).
"""

import asyncio
import contextlib
import logging
from collections.abc import Collection

log = logging.getLogger(__name__)

PIPE_CHUNK_BYTES = 64 * 1024
REFUSE = "refuse"
BLACKHOLE = "blackhole"
CUT_MODES = (REFUSE, BLACKHOLE)
EVERY_PEER = "*"  # the key of a cut that applies to every source address


class _Link:
    """One piped connection: where it comes from, its two sockets, and whether bytes flow through it."""

    def __init__(self, peer: str, client: asyncio.StreamWriter) -> None:
        self.peer = peer
        self.writers = [client]
        self.flowing = asyncio.Event()
        self.closed = False

    def abort(self) -> None:
        self.closed = True
        for writer in self.writers:
            writer.transport.abort()
        self.flowing.set()  # whatever waits to forward wakes up and finds the link closed


class TcpProxy:
    def __init__(self, target_host: str, target_port: int, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.target = (target_host, target_port)
        self.host = host
        self._listen = (host, port)
        self._server: asyncio.AbstractServer | None = None
        self._links: set[_Link] = set()
        self._pipes: set[asyncio.Task] = set()
        self._cuts: dict[str, str] = {}  # peer host (or EVERY_PEER) -> cut mode

    @property
    def port(self) -> int:
        assert self._server is not None, "not started"
        return self._server.sockets[0].getsockname()[1]

    @property
    def is_cut(self) -> bool:
        return bool(self._cuts)

    def cut_mode(self, peer: str) -> str | None:
        """How connections from `peer` are cut now, or None if they are forwarded."""
        return self._cuts.get(peer, self._cuts.get(EVERY_PEER))

    async def start(self) -> "TcpProxy":
        self._server = await asyncio.start_server(self._accept, *self._listen, reuse_address=True)
        return self

    def cut(self, peers: Collection[str] | None = None, mode: str = REFUSE) -> None:
        """Cut the connections from these peer addresses (None: from everyone) until heal()."""
        assert mode in CUT_MODES, mode
        for peer in (EVERY_PEER,) if peers is None else peers:
            self._cuts[peer] = mode
        self._apply()

    def heal(self, peers: Collection[str] | None = None) -> None:
        """Forward again from these peers (None: from everyone), held bytes first."""
        if peers is None:
            self._cuts.clear()
        for peer in peers or ():
            self._cuts.pop(peer, None)
        self._apply()

    def _apply(self) -> None:
        for link in list(self._links):
            self._apply_to(link)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            link.abort()
        for task in list(self._pipes):
            task.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        link = _Link(client_writer.get_extra_info("peername")[0], client_writer)
        self._links.add(link)
        try:
            self._apply_to(link)
            # A blackholed peer's connection waits here, as its SYN would, until the link heals.
            await link.flowing.wait()
            if link.closed:
                return
            try:
                upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
            except OSError as e:
                log.debug("proxy to %s:%d: %s", *self.target, e)
                return
            link.writers.append(upstream_writer)
            self._apply_to(link)  # cut while connecting upstream
            pipes = [asyncio.create_task(self._pipe(client_reader, upstream_writer, link)),
                     asyncio.create_task(self._pipe(upstream_reader, client_writer, link))]
            self._pipes.update(pipes)
            try:
                await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in pipes:
                    task.cancel()
                await asyncio.gather(*pipes, return_exceptions=True)
                self._pipes.difference_update(pipes)
        finally:
            link.abort()
            self._links.discard(link)

    def _apply_to(self, link: _Link) -> None:
        mode = self.cut_mode(link.peer)
        if link.closed:
            return
        if mode == REFUSE:
            link.abort()
        elif mode == BLACKHOLE:
            link.flowing.clear()
        else:
            link.flowing.set()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while chunk := await reader.read(PIPE_CHUNK_BYTES):
                await link.flowing.wait()  # a blackhole holds this chunk; the kernel buffers fill behind it
                if link.closed:
                    return
                writer.write(chunk)
                await writer.drain()
