"""A TCP proxy that can cut the link it carries: the network fault of the cluster tests.

Each accepted connection is piped to the target in both directions. `cut()` closes every piped connection
and refuses new ones (accepts and closes them at once, as a peer behind a dead link looks to a client
with connect timeouts), until `heal()`. A broker whose controller address points at such a proxy can be
partitioned from the controller while clients and other brokers still reach it: the fault behind a
zombie leader (KIP-101's divergence scenario).
"""

import asyncio
import contextlib
import logging

log = logging.getLogger(__name__)

PIPE_CHUNK_BYTES = 64 * 1024


class TcpProxy:
    def __init__(self, target_host: str, target_port: int, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.target = (target_host, target_port)
        self._listen = (host, port)
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._pipes: set[asyncio.Task] = set()
        self.is_cut = False

    @property
    def port(self) -> int:
        assert self._server is not None, "not started"
        return self._server.sockets[0].getsockname()[1]

    async def start(self) -> "TcpProxy":
        self._server = await asyncio.start_server(self._accept, *self._listen, reuse_address=True)
        return self

    def cut(self) -> None:
        """Drop every connection through the proxy and refuse new ones until heal()."""
        self.is_cut = True
        for writer in list(self._writers):
            writer.transport.abort()

    def heal(self) -> None:
        self.is_cut = False

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        self.cut()
        for task in list(self._pipes):
            task.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        if self.is_cut:
            client_writer.transport.abort()
            return
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError as e:
            log.debug("proxy to %s:%d: %s", *self.target, e)
            client_writer.transport.abort()
            return
        if self.is_cut:  # cut while connecting upstream
            client_writer.transport.abort()
            upstream_writer.transport.abort()
            return
        self._writers.update((client_writer, upstream_writer))
        pipes = [asyncio.create_task(self._pipe(client_reader, upstream_writer)),
                 asyncio.create_task(self._pipe(upstream_reader, client_writer))]
        self._pipes.update(pipes)
        try:
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for writer in (client_writer, upstream_writer):
                writer.transport.abort()
                self._writers.discard(writer)
            for task in pipes:
                task.cancel()
            await asyncio.gather(*pipes, return_exceptions=True)
            self._pipes.difference_update(pipes)

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while chunk := await reader.read(PIPE_CHUNK_BYTES):
                writer.write(chunk)
                await writer.drain()
