"""Blocking probes of a node (broker or controller) from outside: does it answer ApiVersions?"""

import socket
import ssl

from replog.protocol.apis import ApiKey
from replog.protocol.frames import size_prefix
from replog.protocol.headers import encode_request_header


def answers_api_versions(host: str, port: int, timeout: float = 1.0,
                         ssl_context: ssl.SSLContext | None = None) -> bool:
    """One blocking ApiVersions v0 round trip: the node (broker or controller) serves requests, not just
    listens. ssl_context: the port is a TLS listener (ApiVersions needs no SASL login first)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw:
            s = raw if ssl_context is None else ssl_context.wrap_socket(raw, server_hostname=host)
            with s:
                body = exchange_api_versions(s, 1, "replog-probe")
    except (OSError, ConnectionError):
        return False
    correlation_id = int.from_bytes(body[:4], "big")
    error_code = int.from_bytes(body[4:6], "big", signed=True)
    return correlation_id == 1 and error_code == 0


def exchange_api_versions(s: socket.socket, correlation_id: int, client_id: str) -> bytes:
    """Send an ApiVersions v0 request on a connected socket and return the response frame after its size."""
    header = encode_request_header(ApiKey.API_VERSIONS, 0, correlation_id, client_id)
    s.sendall(size_prefix(len(header)) + header)
    size = int.from_bytes(_recv_exactly(s, 4), "big")
    if not 0 < size < 1 << 20:
        raise ConnectionError(f"implausible ApiVersions response size {size}")
    return _recv_exactly(s, size)


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = s.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        chunks += chunk
    return bytes(chunks)
