"""The controller's configuration (Kafka's controller and broker-session keys), its first epoch and its clock."""

import ssl
import time
from dataclasses import dataclass, field
from pathlib import Path

from replog.client.security import ClientSecurity
from replog.metrics.config import MetricsConfig
from replog.raft.config import QuorumConfig
from replog.security.authorizer import NO_AUTHORIZER, AuthorizerConfig
from replog.server.auth import ONLY_SECRET_HOLDERS, ClusterMembers
from replog.server.listener import ListenerSecurity
from replog.server.sasl import ScramCredential

from .channel import ChannelConfig
from .heartbeats import BROKER_SESSION_TIMEOUT_MS

# The controller epoch is the quorum's leader epoch: the first election makes epoch 1. Brokers start at -1
# and take the epoch of the first request they accept.
FIRST_CONTROLLER_EPOCH = 1


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    metadata_log_dir: Path
    # An unsecured cluster's SASL/PLAIN password, shared by every node (server/inter_broker.py); a secured one
    # sets broker_link and controller_link instead.
    inter_broker_secret: str | None = None
    controller_id: int = 3000
    cluster_id: str = "replog-cluster"
    host: str = "127.0.0.1"
    port: int = 0  # 0: the OS picks one; see ClusterController.port
    broker_session_timeout_ms: int = BROKER_SESSION_TIMEOUT_MS
    unclean_leader_election_enable: bool = False  # the cluster default; topics may override it
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_ms: int = 300_000  # leader.imbalance.check.interval.seconds = 300
    leader_imbalance_per_broker_percentage: int = 10
    num_partitions: int = 1  # for CreateTopics asking for the default (-1)
    default_replication_factor: int = 1
    request_timeout_ms: int = 30_000  # Kafka's controller.socket.timeout.ms
    propagation_timeout_ms: int = 30_000  # how long settle() and CreateTopics wait for the brokers' answers
    channel: ChannelConfig = field(default_factory=ChannelConfig)
    max_connections: int = 1_000
    max_inflight_requests_per_connection: int = 16
    max_frame_bytes: int = 100 * 1024 * 1024  # socket.request.max.bytes
    # The local address of its connections to brokers (as the brokers' inter.broker.bind.host); None: the OS's.
    inter_broker_bind_host: str | None = None
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    # controller.quorum.* (replog/raft/config.py); None: a quorum of this controller alone.
    quorum: QuorumConfig | None = None
    metadata_snapshot_max_bytes: int = 20 * 1024 * 1024  # metadata.log.max.record.bytes.between.snapshots
    # The cluster's first SCRAM credentials (bootstrap.scram.credentials), written once into an empty log.
    bootstrap_scram_credentials: tuple[tuple[str, str, ScramCredential], ...] = ()
    # TLS to the brokers' inter-broker listeners when they are SSL or SASL_SSL (security.inter.broker.protocol).
    broker_ssl_context: ssl.SSLContext | None = None
    # Its listener's TLS and SASL (controller.listener.names' protocol); None: PLAINTEXT.
    listener_security: ListenerSecurity | None = None
    # How it logs in to the brokers and to the other controllers; None: PLAIN with inter_broker_secret.
    broker_link: ClientSecurity | None = None
    controller_link: ClientSecurity | None = None
    members: ClusterMembers = ONLY_SECRET_HOLDERS  # who may perform cluster actions here (server/auth.py)
    # authorizer.class.name, super.users, allow.everyone.if.no.acl.found: an ACL in the metadata log may grant
    # CLUSTER_ACTION (KIP-801: a controller reads ACLs from the log it serves).
    authorizer: AuthorizerConfig = NO_AUTHORIZER

    def __post_init__(self) -> None:
        assert self.inter_broker_secret or (self.broker_link is not None and self.controller_link is not None), \
            "a controller needs inter.broker.secret, or its links to the other nodes, to talk to them"
        assert self.controller_id >= 0
        assert 0 <= self.port < 65536
        assert self.broker_session_timeout_ms > 0
        assert self.num_partitions > 0 and self.default_replication_factor > 0
        assert self.metadata_snapshot_max_bytes > 0
        assert self.leader_imbalance_check_interval_ms > 0 and 0 <= self.leader_imbalance_per_broker_percentage <= 100
