"""Who is on the other end of a connection, and whether it may perform cluster actions.

Kafka lets only brokers and controllers replicate (Fetch with a replica id), send LeaderAndIsr /
UpdateMetadata / StopReplica, register, heartbeat and answer AlterPartition: the CLUSTER_ACTION operation on the
Cluster resource. Principals come from SASL (User:name, sasl.py) or from the peer's TLS certificate
(User:CN=...; tls.py); without either a connection is `User:ANONYMOUS`.

Which principals act for the cluster (ClusterMembers): as in Kafka, the node principals listed in `super.users`
(KIP-801 asks for the brokers' and controllers' principals there: a controller authorizes them before any ACL
is readable); with no authorizer (`authorizer.class.name` unset) Kafka allows every principal everything.
Kafka authorizes CLUSTER_ACTION like any operation, so an ACL allowing it on the cluster (`replog acls --add
--operation ClusterAction --cluster`) also lets a principal send what nodes send (RequestContext.
may_act_for_cluster), decided per request on the current ACLs; unlike a super user it passes no other check. On an
unsecured replog cluster the nodes may instead share `inter.broker.secret`, a PLAIN password that makes its
holder a node; a node configured with it restricts cluster actions to its holders and super users, so a
PLAINTEXT cluster without an authorizer is not open to LeaderAndIsr from anyone. The decision is taken when the
principal is established (TLS handshake or SASL); everyone else gets CLUSTER_AUTHORIZATION_FAILED.
"""

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

from .reauth import Identity, reauth_refusal, session_expiry
from .sasl import PLAIN, Authenticated, ListenerSasl, MechanismExchange, SaslAuthenticationFailed

ANONYMOUS = "User:ANONYMOUS"


@dataclass(frozen=True, slots=True)
class ClusterMembers:
    """Which principals may perform cluster actions on this node (see the module's docstring).

    restricted: an authorizer is on, or the node takes inter.broker.secret; else every principal may, as in
    Kafka without an authorizer. acl_allows_cluster_action(principal, host): whether the node's current ACLs
    allow CLUSTER_ACTION on the cluster (None: no authorizer)."""

    super_users: frozenset[str] = frozenset()
    restricted: bool = True
    acl_allows_cluster_action: Callable[[str, str], bool] | None = None

    def may_act_for_cluster(self, principal: str) -> bool:
        """A node principal: it acts for the cluster and passes every check."""
        return not self.restricted or principal in self.super_users

    def grants_cluster_action(self, principal: str, host: str) -> bool:
        """CLUSTER_ACTION granted by an ACL rather than by being a node principal."""
        return self.acl_allows_cluster_action is not None and self.acl_allows_cluster_action(principal, host)


def client_host(peer: str) -> str:
    """The address part of "host:port" (an IPv6 host keeps its colons)."""
    return peer.rsplit(":", 1)[0]


ONLY_SECRET_HOLDERS = ClusterMembers()  # no super users: only the inter.broker.secret makes a node


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
    members: ClusterMembers = ONLY_SECRET_HOLDERS
    mechanism: str | None = None  # the SASL mechanism agreed in the last SaslHandshake
    expires_at: float | None = None  # KIP-368: when the SASL session ends (time.monotonic()); None: never
    last_reauth_start: float | None = None  # when re-authentication last began on this connection
    reauthenticating: Identity | None = None  # who is re-authenticating, between SaslHandshake and success
    reauthentications: int = 0  # successful re-authentications on this connection

    def identified_by_certificate(self, principal: str) -> None:
        """mTLS: the principal of the peer's certificate, until SASL (on SASL_SSL) replaces it."""
        self.principal, self.cluster_action = principal, self.members.may_act_for_cluster(principal)

    def authenticated(self, who: Authenticated, now: float) -> int:
        """The exchange succeeded at `now`: the session's lifetime in ms (0: unlimited), which SaslAuthenticate
        v1+ tells the client. SaslAuthenticationFailed if it was a re-authentication as someone else."""
        if self.reauthenticating is not None:
            refusal = reauth_refusal(self.reauthenticating, self.mechanism or "", who.principal)
            if refusal is not None:
                raise SaslAuthenticationFailed(refusal)
            self.reauthentications += 1
        max_reauth_ms = self.sasl.reauth_ms(self.mechanism) if self.mechanism is not None else 0
        lifetime_ms, self.expires_at = session_expiry(max_reauth_ms, now)
        self.principal = who.principal
        self.cluster_action = who.cluster_action or self.members.may_act_for_cluster(who.principal)
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
