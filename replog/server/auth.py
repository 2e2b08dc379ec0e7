"""Who is on the other end of a connection, and whether it may perform cluster actions.

Kafka lets only brokers and the controller replicate (Fetch with a replica id), send LeaderAndIsr /
UpdateMetadata / StopReplica, and answer AlterPartition: the CLUSTER_ACTION operation, granted to the inter-broker
principal. replog's inter-broker principal authenticates with SASL/PLAIN (RFC 4616) using the cluster's shared
`inter.broker.secret`. Client principals come from SASL (User:name, sasl.py) or from the client's TLS certificate
(User:CN=...; tls.py); without either a connection is `User:ANONYMOUS`. Only the inter-broker principal gets
cluster actions; everyone else gets CLUSTER_AUTHORIZATION_FAILED for them.
"""

import enum
from dataclasses import dataclass, field

from .sasl import PLAIN, Authenticated, ListenerSasl, MechanismExchange

ANONYMOUS = "User:ANONYMOUS"


class _NoCredentials:
    def plain_password(self, username: str) -> None:
        return None

    def scram_credential(self, mechanism: str, username: str) -> None:
        return None


# A listener that configures no SASL: PLAIN for the inter-broker principal only.
INTER_BROKER_ONLY = ListenerSasl((PLAIN,), _NoCredentials())


class SaslState(enum.Enum):
    NONE = "none"  # no SASL yet: requests are anonymous (or the TLS certificate's principal)
    HANDSHAKE_DONE = "handshake_done"  # mechanism agreed; next: SaslAuthenticate (v1) or a bare token (v0)
    AUTHENTICATED = "authenticated"


@dataclass(slots=True)
class Session:
    principal: str = ANONYMOUS
    sasl_state: SaslState = SaslState.NONE
    cluster_action: bool = False
    listener_name: str = "PLAINTEXT"
    sasl: ListenerSasl = field(default=INTER_BROKER_ONLY)
    exchange: MechanismExchange | None = None  # the SASL exchange under way (between handshake and success)
    raw_tokens: bool = False  # after SaslHandshake v0: the next frames are bare SASL tokens (KIP-43)

    def authenticated(self, who: Authenticated) -> None:
        self.principal, self.cluster_action = who.principal, who.cluster_action
        self.sasl_state = SaslState.AUTHENTICATED
        self.exchange, self.raw_tokens = None, False

    @property
    def must_authenticate(self) -> bool:
        """On a SASL listener nothing but ApiVersions and the SASL exchange is answered until authenticated."""
        return self.sasl.required and self.sasl_state is not SaslState.AUTHENTICATED
