"""Connections from this broker to other nodes (leaders it follows, the controller), authenticated as the
inter-broker principal so they may perform cluster actions (see auth.py)."""

from replog.client.connection import Connection
from replog.client.errors import KafkaError
from replog.protocol.apis import ApiKey

from .sasl import PLAIN, plain_token

SASL_HANDSHAKE_VERSION = 1
SASL_AUTHENTICATE_VERSION = 2


async def open_inter_broker_connection(host: str, port: int, *, client_id: str, username: str, secret: str,
                                       request_timeout_ms: int,
                                       max_frame_bytes: int = 128 * 1024 * 1024,
                                       local_host: str | None = None) -> Connection:
    """Connect (from local_host, if given), negotiate versions and authenticate with SASL/PLAIN; raises
    KafkaError on any failure."""
    connection = Connection(host, port, client_id=client_id, request_timeout_ms=request_timeout_ms,
                            max_frame_bytes=max_frame_bytes, local_host=local_host)
    await connection.connect()
    try:
        handshake = await connection.send(ApiKey.SASL_HANDSHAKE, {"mechanism": PLAIN},
                                          version=SASL_HANDSHAKE_VERSION)
        if handshake.error_code != 0:
            raise KafkaError(int(handshake.error_code), f"{host}:{port} refused SASL mechanism {PLAIN}")
        answer = await connection.send(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": plain_token(username, secret)},
                                       version=SASL_AUTHENTICATE_VERSION)
        if answer.error_code != 0:
            raise KafkaError(int(answer.error_code), answer.error_message or "SASL authentication failed")
    except BaseException:
        connection.close()
        raise
    return connection
