"""Who is on the other end of a connection, and whether it may perform cluster actions.

Kafka lets only brokers and the controller replicate (Fetch with a replica id), send LeaderAndIsr /
UpdateMetadata / StopReplica, and answer AlterPartition: the CLUSTER_ACTION operation, granted to the inter-broker
principal. replog's inter-broker principal authenticates with SASL/PLAIN (RFC 4616) using the cluster's shared
`inter.broker.secret`; every other connection stays `User:ANONYMOUS` and may produce and consume but gets
CLUSTER_AUTHORIZATION_FAILED for cluster actions. Without a configured secret nobody may perform them.
"""

import enum
import hmac
from dataclasses import dataclass

ANONYMOUS = "User:ANONYMOUS"
PLAIN = "PLAIN"
MAX_SASL_TOKEN_BYTES = 4096


class SaslState(enum.Enum):
    NONE = "none"  # no SASL yet: requests are anonymous
    HANDSHAKE_DONE = "handshake_done"  # mechanism agreed; the next request must be SaslAuthenticate
    AUTHENTICATED = "authenticated"


@dataclass(slots=True)
class Session:
    principal: str = ANONYMOUS
    sasl_state: SaslState = SaslState.NONE
    cluster_action: bool = False


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


def authenticate_plain(session: Session, token: bytes, inter_broker_secret: str | None) -> str | None:
    """Authenticate session with a PLAIN token; returns an error message, or None on success."""
    parsed = parse_plain_token(token)
    if parsed is None:
        return "malformed PLAIN token"
    _, username, password = parsed
    if inter_broker_secret is None or not hmac.compare_digest(password.encode(), inter_broker_secret.encode()):
        return f"authentication failed for user {username!r}"
    session.principal = f"User:{username}"
    session.sasl_state = SaslState.AUTHENTICATED
    session.cluster_action = True
    return None
