"""Binding a server's listening sockets: the one place the broker and the controller open their listeners.

A TLS listener hands its SSLContext to create_server: uvloop runs the handshake before the connection's
protocol hears of the connection (its server-side loop.start_tls stalls, so the handshake is not ours to run).
"""

import asyncio
import ssl
from dataclasses import dataclass

from replog.security.principal_mapping import DEFAULT_MAPPER, PrincipalMapper

from .auth import INTER_BROKER_ONLY, ONLY_SECRET_HOLDERS, ClusterMembers
from .connection import ConnectionHolder, ServerConnection
from .dispatch import Dispatcher
from .listener_socket import listen_address
from .sasl import ListenerSasl

TLS_HANDSHAKE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ListenerSecurity:
    """What a listener's connections go through before requests: TLS (a server context) and SASL."""

    name: str = "PLAINTEXT"
    tls: ssl.SSLContext | None = None
    sasl: ListenerSasl = INTER_BROKER_ONLY
    members: ClusterMembers = ONLY_SECRET_HOLDERS  # who may perform cluster actions (auth.py)
    principal_mapper: PrincipalMapper = DEFAULT_MAPPER  # a TLS peer's principal (ssl.principal.mapping.rules)


async def listen(host: str, port: int, holder: ConnectionHolder, dispatcher: Dispatcher, *, max_frame_bytes: int,
                 max_inflight: int, use_sendfile: bool, idle_timeout_ms: int | None = None,
                 backlog: int = 100, security: ListenerSecurity = ListenerSecurity()) -> asyncio.AbstractServer:
    """Listen on host:port (0: the OS picks a port; see the returned server's sockets), or on the listening
    socket for it that the parent passed down (listener_socket.py), and serve each accepted connection with a
    ServerConnection that reports to holder and dispatches to dispatcher."""

    def make_connection() -> ServerConnection:
        return ServerConnection(holder, dispatcher, max_frame_bytes=max_frame_bytes, max_inflight=max_inflight,
                                use_sendfile=use_sendfile, idle_timeout_ms=idle_timeout_ms,
                                listener_name=security.name, sasl=security.sasl, tls=security.tls is not None,
                                members=security.members, principal_mapper=security.principal_mapper)

    tls = {} if security.tls is None else {"ssl": security.tls, "ssl_handshake_timeout": TLS_HANDSHAKE_TIMEOUT_S}
    return await asyncio.get_running_loop().create_server(make_connection, **listen_address(host, port),
                                                          reuse_address=True, backlog=backlog, **tls)


def listening_port(server: asyncio.AbstractServer) -> int:
    return server.sockets[0].getsockname()[1]
