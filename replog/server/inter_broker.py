"""Connections from this node to the other nodes (leaders it follows, the controllers, the brokers a controller
tells), and how they log in: the node's principal is a cluster member (auth.py) that may perform cluster
actions.

How a link logs in follows the security protocol of the listener it goes to, as Kafka's
security.inter.broker.protocol / inter.broker.listener.name and controller.listener.names decide it:
- SASL_PLAINTEXT or SASL_SSL: SASL with the node's own user, `inter.broker.sasl.username` and
  `inter.broker.sasl.password` (replog's keys in place of Kafka's JAAS `sasl.jaas.config`), by the mechanism
  `sasl.mechanism.inter.broker.protocol` (to brokers) or `sasl.mechanism.controller.protocol` (to controllers),
  as in Kafka. Brokers may log in to brokers with SCRAM (credentials from the metadata log, KIP-554); the
  controllers' listener cannot take SCRAM, whose credentials live in the log the controllers serve
  (KAFKA-15513, KIP-900), so links to controllers use PLAIN (over TLS) with configured credentials.
- SSL: TLS, presenting the node's keystore; with ssl.client.auth=required the certificate's subject is the
  principal (mTLS).
- On an unsecured cluster (PLAINTEXT listeners): SASL/PLAIN with the cluster-wide `inter.broker.secret`, which
  the other nodes accept as the mark of a node. A secured cluster sets no such secret.
"""

import ssl
from dataclasses import dataclass

from replog.client.connection import Connection
from replog.client.security import ClientSecurity, SaslCredentials

from .listener_config import SecurityProtocol
from .sasl import PLAIN, SUPPORTED_MECHANISMS

USERNAME_KEY = "inter.broker.sasl.username"
PASSWORD_KEY = "inter.broker.sasl.password"  # noqa: S105 (a key's name, not a password)
INTER_BROKER_MECHANISM_KEY = "sasl.mechanism.inter.broker.protocol"
CONTROLLER_MECHANISM_KEY = "sasl.mechanism.controller.protocol"
# The keys a node reads to log in to the others (besides the ssl.* ones of the listener it connects to).
NODE_LOGIN_KEYS = frozenset({USERNAME_KEY, PASSWORD_KEY, INTER_BROKER_MECHANISM_KEY, CONTROLLER_MECHANISM_KEY})
# Kafka's default for both mechanism keys is GSSAPI, which replog lacks; PLAIN is what replog's links used.
DEFAULT_NODE_MECHANISM = PLAIN


@dataclass(frozen=True)
class NodeIdentity:
    """Who this node is to the others: its SASL user (None: none configured), and the legacy shared secret."""

    node_name: str  # the user name sent with inter.broker.secret (broker-1, controller-3000)
    username: str | None = None
    password: str | None = None
    secret: str | None = None  # inter.broker.secret

    @classmethod
    def from_properties(cls, node_name: str, props: dict[str, str], secret: str | None) -> "NodeIdentity":
        username, password = props.get(USERNAME_KEY) or None, props.get(PASSWORD_KEY) or None
        if (username is None) != (password is None):
            raise ValueError(f"{USERNAME_KEY} and {PASSWORD_KEY} go together")
        return cls(node_name, username, password, secret or None)

    @property
    def has_credentials(self) -> bool:
        return self.username is not None or self.secret is not None


def parse_node_mechanism(props: dict[str, str], key: str) -> str:
    mechanism = props.get(key, DEFAULT_NODE_MECHANISM).strip().upper()
    if mechanism not in SUPPORTED_MECHANISMS:
        raise ValueError(f"{key}={mechanism}: expected one of {', '.join(SUPPORTED_MECHANISMS)}")
    return mechanism


def node_sasl_credentials(protocol: SecurityProtocol, identity: NodeIdentity, mechanism: str, *,
                          link: str) -> SaslCredentials | None:
    """What to log in with on a listener of `protocol` (link: what the link is, for error messages); None: no
    SASL. ValueError when the node has no credential that listener takes."""
    if protocol.uses_sasl:
        if identity.username is not None and identity.password is not None:
            return SaslCredentials(mechanism, identity.username, identity.password)
        if identity.secret is not None and mechanism == PLAIN:
            return SaslCredentials(PLAIN, identity.node_name, identity.secret)
        raise ValueError(f"{link} is {protocol.name} with {mechanism}: set {USERNAME_KEY} and {PASSWORD_KEY}")
    # SASL is optional on PLAINTEXT and SSL listeners: only the shared secret uses it (auth.INTER_BROKER_ONLY).
    return None if identity.secret is None else SaslCredentials(PLAIN, identity.node_name, identity.secret)


def node_link_security(protocol: SecurityProtocol, identity: NodeIdentity, mechanism: str,
                       tls: ssl.SSLContext | None, *, link: str) -> ClientSecurity:
    """TLS (tls: a client context when the protocol uses TLS) and SASL to a listener of `protocol`."""
    assert (tls is not None) == protocol.uses_tls
    return ClientSecurity(tls, node_sasl_credentials(protocol, identity, mechanism, link=link))


async def open_node_connection(host: str, port: int, *, client_id: str, security: ClientSecurity,
                               request_timeout_ms: int, max_frame_bytes: int = 128 * 1024 * 1024,
                               local_host: str | None = None) -> Connection:
    """Connect (from local_host, if given), negotiate versions and log in as `security` says; raises KafkaError
    (or OSError, ssl.SSLError) on any failure."""
    connection = Connection(host, port, client_id=client_id, request_timeout_ms=request_timeout_ms,
                            max_frame_bytes=max_frame_bytes, local_host=local_host, security=security)
    try:
        await connection.connect()
    except BaseException:
        connection.close()
        raise
    return connection


async def open_inter_broker_connection(host: str, port: int, *, client_id: str, username: str, secret: str,
                                       request_timeout_ms: int,
                                       max_frame_bytes: int = 128 * 1024 * 1024,
                                       local_host: str | None = None,
                                       ssl_context: ssl.SSLContext | None = None) -> Connection:
    """A link of an unsecured cluster: SASL/PLAIN with inter.broker.secret (over TLS if ssl_context)."""
    return await open_node_connection(
        host, port, client_id=client_id, security=ClientSecurity(ssl_context, SaslCredentials(PLAIN, username, secret)),
        request_timeout_ms=request_timeout_ms, max_frame_bytes=max_frame_bytes, local_host=local_host)
