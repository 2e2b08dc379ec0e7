"""Binding a server's listening socket: the one place the broker and the controller open their listener."""

import asyncio

from .connection import ConnectionHolder, ServerConnection
from .dispatch import Dispatcher
from .listener_socket import listen_address


async def listen(host: str, port: int, holder: ConnectionHolder, dispatcher: Dispatcher, *, max_frame_bytes: int,
                 max_inflight: int, use_sendfile: bool, idle_timeout_ms: int | None = None,
                 backlog: int = 100) -> asyncio.AbstractServer:
    """Listen on host:port (0: the OS picks a port; see the returned server's sockets), or on the listening
    socket for it that the parent passed down (listener_socket.py), and serve each accepted connection with a
    ServerConnection that reports to holder and dispatches to dispatcher."""
    return await asyncio.get_running_loop().create_server(
        lambda: ServerConnection(holder, dispatcher, max_frame_bytes=max_frame_bytes, max_inflight=max_inflight,
                                 use_sendfile=use_sendfile, idle_timeout_ms=idle_timeout_ms),
        **listen_address(host, port), reuse_address=True, backlog=backlog)


def listening_port(server: asyncio.AbstractServer) -> int:
    return server.sockets[0].getsockname()[1]
