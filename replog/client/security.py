"""How the bundled client gets in: TLS (a client SSLContext) and SASL (PLAIN, or SCRAM-SHA-256/512 through
scramp's client), as Kafka clients' security.protocol, sasl.mechanism, sasl.username and sasl.password."""

import ssl
from dataclasses import dataclass

from ..protocol.apis import ApiKey
from .errors import KafkaError

SASL_HANDSHAKE_VERSION = 1
SASL_AUTHENTICATE_VERSION = 2
SASL_AUTHENTICATION_FAILED = 58
UNSUPPORTED_SASL_MECHANISM = 33
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class SaslCredentials:
    mechanism: str
    username: str
    password: str

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"sasl.mechanism {self.mechanism} not supported (expected one of {', '.join(MECHANISMS)})")


@dataclass(frozen=True)
class ClientSecurity:
    """ssl_context: TLS to the brokers (SSL, SASL_SSL); sasl: authenticate after connecting (SASL_*)."""

    ssl_context: ssl.SSLContext | None = None
    sasl: SaslCredentials | None = None


async def authenticate(connection, credentials: SaslCredentials) -> None:
    """SaslHandshake v1 then SaslAuthenticate until the mechanism completes; raises KafkaError on refusal.
    A SCRAM server whose final message does not prove it knows the password is refused too (RFC 5802)."""
    handshake = await connection.send(ApiKey.SASL_HANDSHAKE, {"mechanism": credentials.mechanism},
                                      version=SASL_HANDSHAKE_VERSION)
    if handshake.error_code != 0:
        raise KafkaError(int(handshake.error_code), f"broker offers SASL mechanisms {list(handshake.mechanisms)}, "
                                                    f"not {credentials.mechanism}")
    if credentials.mechanism == "PLAIN":
        token = b"\0" + credentials.username.encode() + b"\0" + credentials.password.encode()
        await _step(connection, token)
        return
    import scramp  # here, not at import: only SCRAM logins need it, and it slows every broker start

    client = scramp.ScramClient([credentials.mechanism], credentials.username, credentials.password)
    server_first = await _step(connection, client.get_client_first().encode())
    try:
        client.set_server_first(server_first.decode())
        server_final = await _step(connection, client.get_client_final().encode())
        client.set_server_final(server_final.decode())
    except (scramp.ScramException, UnicodeDecodeError) as e:
        raise KafkaError(SASL_AUTHENTICATION_FAILED, f"SCRAM exchange with the broker failed: {e}") from e


async def _step(connection, token: bytes) -> bytes:
    answer = await connection.send(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token}, version=SASL_AUTHENTICATE_VERSION)
    if answer.error_code != 0:
        raise KafkaError(int(answer.error_code), answer.error_message or "SASL authentication failed")
    return bytes(answer.auth_bytes)
