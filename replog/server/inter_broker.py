"""Connections from this broker to other nodes (leaders it follows, the controller), authenticated as the
inter-broker principal so they may perform cluster actions (see auth.py): SASL/PLAIN with the cluster's
inter.broker.secret, over TLS when the other node's inter-broker listener is SASL_SSL."""

import ssl

from replog.client.connection import Connection
from replog.client.security import ClientSecurity, SaslCredentials

from .sasl import PLAIN


async def open_inter_broker_connection(host: str, port: int, *, client_id: str, username: str, secret: str,
                                       request_timeout_ms: int,
                                       max_frame_bytes: int = 128 * 1024 * 1024,
                                       local_host: str | None = None,
                                       ssl_context: ssl.SSLContext | None = None) -> Connection:
    """Connect (from local_host, if given; with TLS if ssl_context), negotiate versions and authenticate with
    SASL/PLAIN; raises KafkaError on any failure."""
    connection = Connection(host, port, client_id=client_id, request_timeout_ms=request_timeout_ms,
                            max_frame_bytes=max_frame_bytes, local_host=local_host,
                            security=ClientSecurity(ssl_context, SaslCredentials(PLAIN, username, secret)))
    try:
        await connection.connect()
    except BaseException:
        connection.close()
        raise
    return connection
