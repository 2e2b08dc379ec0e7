"""SASL on the server side, sans-IO: the mechanisms (PLAIN, RFC 4616; SCRAM-SHA-256/512, RFC 5802/7677 through
scramp), where their credentials come from, and what a listener offers.

A mechanism exchange takes client tokens one at a time (each arrives in a SaslAuthenticate request) and gives
back the server's token, until it is complete or fails with SaslAuthenticationFailed. Credentials come from a
CredentialStore; today's store is built from broker properties (credential_store.py), later the metadata log
(KIP-554) can supply the same interface.
"""

import hmac
from dataclasses import dataclass
from typing import Protocol

PLAIN = "PLAIN"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SUPPORTED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
MAX_SASL_TOKEN_BYTES = 4096  # PLAIN and SCRAM tokens are a few hundred bytes


class SaslAuthenticationFailed(Exception):
    """Answered with SASL_AUTHENTICATION_FAILED and this message; the connection is closed after it."""


@dataclass(frozen=True)
class ScramCredential:
    """What the server keeps of a SCRAM password (RFC 5802 section 3), never the password itself."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


class CredentialStore(Protocol):
    def plain_password(self, username: str) -> str | None: ...

    def scram_credential(self, mechanism: str, username: str) -> ScramCredential | None: ...


@dataclass(frozen=True)
class Authenticated:
    principal: str  # User:name
    cluster_action: bool = False  # the inter-broker principal (see auth.py)


class MechanismExchange(Protocol):
    def step(self, token: bytes) -> tuple[bytes, Authenticated | None]:
        """The server's answer to a client token, and who the client is once the exchange is complete."""


def _invalid_credentials(mechanism: str) -> SaslAuthenticationFailed:
    # Kafka's message; it does not tell an unknown user from a wrong password.
    return SaslAuthenticationFailed(
        f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}")


def parse_plain_token(token: bytes) -> tuple[str, str, str] | None:
    """(authzid, authcid, password) from an RFC 4616 message, or None if malformed."""
    if len(token) > MAX_SASL_TOKEN_BYTES:
        return None
    parts = token.split(b"\0")
    if len(parts) != 3:
        return None
    try:
        authzid, username, password = (p.decode() for p in parts)
    except UnicodeDecodeError:
        return None
    if not username or not password or (authzid and authzid != username):
        return None
    return authzid, username, password


def plain_token(username: str, password: str) -> bytes:
    return b"\0" + username.encode() + b"\0" + password.encode()


class PlainExchange:
    """One token: the user's own password from the store, else the cluster's inter-broker secret, which makes
    the inter-broker principal (allowed CLUSTER_ACTION)."""

    def __init__(self, store: CredentialStore, inter_broker_secret: str | None) -> None:
        self._store = store
        self._inter_broker_secret = inter_broker_secret

    def step(self, token: bytes) -> tuple[bytes, Authenticated | None]:
        parsed = parse_plain_token(token)
        if parsed is None:
            raise SaslAuthenticationFailed("malformed PLAIN token")
        _, username, password = parsed
        expected = self._store.plain_password(username)
        if expected is not None:
            if hmac.compare_digest(password.encode(), expected.encode()):
                return b"", Authenticated(f"User:{username}")
        elif self._inter_broker_secret is not None and hmac.compare_digest(
                password.encode(), self._inter_broker_secret.encode()):
            return b"", Authenticated(f"User:{username}", cluster_action=True)
        raise _invalid_credentials(PLAIN)


class ScramExchange:
    """client-first -> server-first, client-final -> server-final (RFC 5802 section 5), by scramp."""

    def __init__(self, mechanism: str, store: CredentialStore) -> None:
        assert mechanism in SCRAM_MECHANISMS
        self._mechanism = mechanism
        self._store = store
        self._username: str | None = None
        import scramp  # here, not at import: only SCRAM listeners need it, and it slows every start

        self._scram_error = scramp.ScramException
        self._server = scramp.ScramMechanism(mechanism).make_server(self._auth_info)

    def _auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int]:
        credential = self._store.scram_credential(self._mechanism, username)
        if credential is None:
            raise _invalid_credentials(self._mechanism)
        self._username = username
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def _accept_librdkafka_nonce(self, client_final: str) -> None:
        """librdkafka before 2.6.1 (librdkafka#4895; kcat and distributions still ship 2.0) sends, in its final
        message, its own nonce again before the combined nonce, and proves the message as sent. Kafka up to 3.9
        accepted a nonce that ends with the server's (ScramSaslServer), so those clients log in to Kafka 3.x;
        replog does the same. The server's nonce is still all there and covered by the proof."""
        sent = next((part[2:] for part in client_final.split(",") if part.startswith("r=")), None)
        expected = str(self._server.nonce)
        if sent is not None and sent != expected and sent.endswith(expected):
            self._server.nonce = type(self._server.nonce)(sent)

    def step(self, token: bytes) -> tuple[bytes, Authenticated | None]:
        if len(token) > MAX_SASL_TOKEN_BYTES:
            raise SaslAuthenticationFailed("SCRAM message too long")
        try:
            message = token.decode()
            if self._username is None:
                self._server.set_client_first(message)
                return self._server.get_server_first().encode(), None
            self._accept_librdkafka_nonce(message)
            self._server.set_client_final(message)
            return self._server.get_server_final().encode(), Authenticated(f"User:{self._username}")
        except UnicodeDecodeError:
            raise SaslAuthenticationFailed("SCRAM message is not UTF-8") from None
        except self._scram_error:
            raise _invalid_credentials(self._mechanism) from None


@dataclass(frozen=True)
class ListenerSasl:
    """What one listener offers: its SASL mechanisms and where their credentials come from.

    required: a SASL_PLAINTEXT or SASL_SSL listener, where nothing but ApiVersions and the SASL exchange is
    answered before authentication. On other listeners SASL is optional: the inter-broker principal uses it.
    Sessions have a lifetime (KIP-368, reauth.py) only on SASL listeners, as in Kafka.
    """

    mechanisms: tuple[str, ...]
    store: CredentialStore
    required: bool = False
    max_reauth_ms: tuple[tuple[str, int], ...] = ()  # (mechanism, connections.max.reauth.ms); absent: 0, off

    def reauth_ms(self, mechanism: str) -> int:
        """KIP-368: the session lifetime of a client authenticated with mechanism (0: unlimited)."""
        return dict(self.max_reauth_ms).get(mechanism, 0)

    def exchange(self, mechanism: str, inter_broker_secret: str | None) -> MechanismExchange:
        """inter_broker_secret: the PLAIN password of the inter-broker principal (None: nobody has it)."""
        assert mechanism in self.mechanisms
        if mechanism == PLAIN:
            return PlainExchange(self.store, inter_broker_secret)
        return ScramExchange(mechanism, self.store)


def parse_enabled_mechanisms(value: str) -> tuple[str, ...]:
    mechanisms = tuple(m.strip().upper() for m in value.split(",") if m.strip())
    unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unsupported:
        raise ValueError(f"sasl.enabled.mechanisms: {', '.join(unsupported)} not supported "
                         f"(replog offers {', '.join(SUPPORTED_MECHANISMS)})")
    if not mechanisms:
        raise ValueError("sasl.enabled.mechanisms is empty")
    return mechanisms
