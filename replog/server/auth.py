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

from .reauth import Identity, reauth_refusal, session_expiry
from .sasl import PLAIN, Authenticated, ListenerSasl, MechanismExchange, SaslAuthenticationFailed

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
    mechanism: str | None = None  # the SASL mechanism agreed in the last SaslHandshake
    expires_at: float | None = None  # KIP-368: when the SASL session ends (time.monotonic()); None: never
    last_reauth_start: float | None = None  # when re-authentication last began on this connection
    reauthenticating: Identity | None = None  # who is re-authenticating, between SaslHandshake and success

    def authenticated(self, who: Authenticated, now: float) -> int:
        """The exchange succeeded at `now`: the session's lifetime in ms (0: unlimited), which SaslAuthenticate
        v1+ tells the client. SaslAuthenticationFailed if it was a re-authentication as someone else."""
        if self.reauthenticating is not None:
            refusal = reauth_refusal(self.reauthenticating, self.mechanism or "", who.principal)
            if refusal is not None:
                raise SaslAuthenticationFailed(refusal)
        max_reauth_ms = self.sasl.reauth_ms(self.mechanism) if self.mechanism is not None else 0
        lifetime_ms, self.expires_at = session_expiry(max_reauth_ms, now)
        self.principal, self.cluster_action = who.principal, who.cluster_action
        self.sasl_state = SaslState.AUTHENTICATED
        self.exchange, self.raw_tokens, self.reauthenticating = None, False, None
        return lifetime_ms

    def begin_reauthentication(self, now: float) -> None:
        """KIP-368: back to before the handshake, keeping the principal until the new exchange succeeds."""
        assert self.sasl_state is SaslState.AUTHENTICATED and self.mechanism is not None
        self.reauthenticating = Identity(self.principal, self.mechanism)
        self.sasl_state, self.last_reauth_start = SaslState.NONE, now

    @property
    def must_authenticate(self) -> bool:
        """On a SASL listener nothing but ApiVersions and the SASL exchange is answered until authenticated (or
        while re-authenticating)."""
        required = self.sasl.required or self.reauthenticating is not None
        return required and self.sasl_state is not SaslState.AUTHENTICATED
