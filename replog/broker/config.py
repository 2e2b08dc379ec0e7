"""Broker configuration: a server.properties-style file plus `--override key=value`, Kafka's key names.

Unknown keys are reported (not fatal, as in Kafka, which logs them); malformed values are fatal.
"""

import ssl
import sys
from dataclasses import dataclass, field
from pathlib import Path

from replog.client.security import ClientSecurity
from replog.coordinator.config import GroupCoordinatorConfig
from replog.log.config import CleanerConfig, LogConfig, parse_cleanup_policy
from replog.log.file_budget import MIN_OPEN_FILES, FileBudget, default_max_open_files
from replog.log.writeback import DEFAULT_INTERVAL_BYTES as DEFAULT_WRITEBACK_INTERVAL_BYTES
from replog.metrics.config import MetricsConfig, split_metrics_config
from replog.security.authorizer import AclIndex, Authorizer, AuthorizerConfig, cluster_action_grants
from replog.server.auth import ClusterMembers
from replog.server.inter_broker import (
    CONTROLLER_MECHANISM_KEY,
    INTER_BROKER_MECHANISM_KEY,
    PASSWORD_KEY,
    USERNAME_KEY,
    NodeIdentity,
    node_link_security,
    node_sasl_credentials,
    parse_node_mechanism,
)
from replog.server.listener_config import (
    ListenerSpec,
    SecurityProtocol,
    choose_inter_broker_listener,
    effective_protocol_map,
    parse_listener_names,
    parse_protocol_map,
    resolve_listeners,
)
from replog.server.listener_security import is_listener_key
from replog.server.properties import Listener, parse_bool, parse_listeners, read_properties
from replog.server.tls import client_context, listener_ssl_props

_HOUR_MS = 3600 * 1000
MIN_FETCH_MAX_BYTES = 1024  # Kafka's lower bound of fetch.max.bytes

# key -> (attribute, parser). Aliases map several Kafka keys onto one attribute.
_KEYS: dict[str, tuple[str, object]] = {
    "node.id": ("node_id", int),
    "broker.id": ("node_id", int),
    "listeners": ("listeners", parse_listeners),
    "advertised.listeners": ("advertised_listeners", parse_listeners),
    "listener.security.protocol.map": ("listener_security_protocol_map", parse_protocol_map),
    "inter.broker.listener.name": ("inter_broker_listener_name", str),
    "controller.listener.names": ("controller_listener_names", parse_listener_names),
    "log.dirs": ("log_dirs", lambda v: [Path(p.strip()) for p in v.split(",") if p.strip()]),
    "log.dir": ("log_dirs", lambda v: [Path(v.strip())]),
    "cluster.id": ("cluster_id", str),
    "num.partitions": ("num_partitions", int),
    "default.replication.factor": ("default_replication_factor", int),
    "auto.create.topics.enable": ("auto_create_topics_enable", parse_bool),
    "min.insync.replicas": ("min_insync_replicas", int),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", parse_bool),
    "log.segment.bytes": ("log_segment_bytes", int),
    "log.roll.ms": ("log_roll_ms", int),
    "log.roll.hours": ("log_roll_ms", lambda v: int(v) * _HOUR_MS),
    "log.retention.ms": ("log_retention_ms", int),
    "log.retention.minutes": ("log_retention_ms", lambda v: int(v) * 60 * 1000),
    "log.retention.hours": ("log_retention_ms", lambda v: int(v) * _HOUR_MS),
    "log.retention.bytes": ("log_retention_bytes", int),
    "log.retention.check.interval.ms": ("log_retention_check_interval_ms", int),
    "log.index.interval.bytes": ("log_index_interval_bytes", int),
    "log.index.size.max.bytes": ("log_index_size_max_bytes", int),
    "log.flush.offset.checkpoint.interval.ms": ("log_flush_offset_checkpoint_interval_ms", int),
    "log.cleanup.policy": ("log_cleanup_policy", parse_cleanup_policy),
    "log.cleaner.enable": ("log_cleaner_enable", parse_bool),
    "log.cleaner.threads": ("log_cleaner_threads", int),
    "log.open.files.max": ("log_open_files_max", int),
    "log.writeback.interval.bytes": ("log_writeback_interval_bytes", int),
    "log.cleaner.dedupe.buffer.size": ("log_cleaner_dedupe_buffer_size", int),
    "log.cleaner.backoff.ms": ("log_cleaner_backoff_ms", int),
    "log.cleaner.min.cleanable.ratio": ("log_cleaner_min_cleanable_ratio", float),
    "log.cleaner.delete.retention.ms": ("log_cleaner_delete_retention_ms", int),
    "log.cleaner.min.compaction.lag.ms": ("log_cleaner_min_compaction_lag_ms", int),
    "log.cleaner.max.compaction.lag.ms": ("log_cleaner_max_compaction_lag_ms", int),
    "message.max.bytes": ("message_max_bytes", int),
    "socket.request.max.bytes": ("socket_request_max_bytes", int),
    "max.connections": ("max_connections", int),
    "queued.max.requests": ("queued_max_requests", int),
    "max.inflight.requests.per.connection": ("max_inflight_requests_per_connection", int),
    "connections.max.idle.ms": ("connections_max_idle_ms", int),
    "fetch.sendfile.enable": ("fetch_sendfile_enable", parse_bool),
    "fetch.purgatory.max.size": ("fetch_purgatory_max_size", int),
    "max.incremental.fetch.session.cache.slots": ("max_incremental_fetch_session_cache_slots", int),
    "fetch.max.bytes": ("fetch_max_bytes", int),
    "producer.purgatory.max.size": ("producer_purgatory_max_size", int),
    "replica.lag.time.max.ms": ("replica_lag_time_max_ms", int),
    "replica.high.watermark.checkpoint.interval.ms": ("replica_high_watermark_checkpoint_interval_ms", int),
    "controlled.shutdown.timeout.ms": ("shutdown_drain_timeout_ms", int),
    "controller.quorum.bootstrap.servers": ("controller_bootstrap_servers", str),
    "inter.broker.secret": ("inter_broker_secret", str),
    USERNAME_KEY: ("inter_broker_sasl_username", str),
    PASSWORD_KEY: ("inter_broker_sasl_password", str),
    INTER_BROKER_MECHANISM_KEY: ("sasl_mechanism_inter_broker_protocol",
                                 lambda v: parse_node_mechanism({"k": v}, "k")),
    CONTROLLER_MECHANISM_KEY: ("sasl_mechanism_controller_protocol", lambda v: parse_node_mechanism({"k": v}, "k")),
    "broker.heartbeat.interval.ms": ("broker_heartbeat_interval_ms", int),
    "controlled.shutdown.enable": ("controlled_shutdown_enable", parse_bool),
    "controlled.shutdown.max.retries": ("controlled_shutdown_max_retries", int),
    "controlled.shutdown.retry.backoff.ms": ("controlled_shutdown_retry_backoff_ms", int),
    "broker.rack": ("broker_rack", str),
    "num.replica.fetchers": ("num_replica_fetchers", int),
    "replica.fetch.wait.max.ms": ("replica_fetch_wait_max_ms", int),
    "replica.fetch.min.bytes": ("replica_fetch_min_bytes", int),
    "replica.fetch.max.bytes": ("replica_fetch_max_bytes", int),
    "replica.fetch.response.max.bytes": ("replica_fetch_response_max_bytes", int),
    "replica.fetch.backoff.ms": ("replica_fetch_backoff_ms", int),
    "replication.quota.window.num": ("replication_quota_window_num", int),
    "replication.quota.window.size.seconds": ("replication_quota_window_size_seconds", int),
    "replica.socket.timeout.ms": ("replica_socket_timeout_ms", int),
    "inter.broker.bind.host": ("inter_broker_bind_host", str),
    "authorizer.class.name": ("authorizer_class_name", str),
    "super.users": ("super_users", str),
    "allow.everyone.if.no.acl.found": ("allow_everyone_if_no_acl_found", parse_bool),
}


@dataclass(frozen=True)
class BrokerConfig:
    node_id: int = 1
    listeners: list[Listener] = field(default_factory=lambda: parse_listeners("PLAINTEXT://127.0.0.1:9092"))
    advertised_listeners: list[Listener] | None = None
    listener_security_protocol_map: dict[str, SecurityProtocol] | None = None  # None: Kafka's default map
    inter_broker_listener_name: str | None = None  # None: the PLAINTEXT listener, else the first
    controller_listener_names: tuple[str, ...] = ()
    # the ssl.* and sasl.* keys listeners read, also as listener.name.<l>.* (server/listener_security.py)
    security_props: dict[str, str] = field(default_factory=dict)
    log_dirs: list[Path] = field(default_factory=lambda: [Path("/tmp/replog-logs")])
    cluster_id: str = "replog-cluster"
    num_partitions: int = 1
    default_replication_factor: int = 1
    auto_create_topics_enable: bool = True
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    log_segment_bytes: int = 1 << 30
    log_roll_ms: int = 7 * 24 * _HOUR_MS
    log_retention_ms: int = 7 * 24 * _HOUR_MS
    log_retention_bytes: int = -1
    log_retention_check_interval_ms: int = 300_000
    log_index_interval_bytes: int = 4096
    log_index_size_max_bytes: int = 10 * 1024 * 1024
    log_flush_offset_checkpoint_interval_ms: int = 60_000
    log_cleanup_policy: str = "delete"
    log_cleaner_enable: bool = True
    log_cleaner_threads: int = 1
    log_open_files_max: int = -1  # replog's own: -1 is half of the soft RLIMIT_NOFILE (file_budget.py)
    log_writeback_interval_bytes: int = DEFAULT_WRITEBACK_INTERVAL_BYTES  # replog's own (log/writeback.py)
    log_cleaner_dedupe_buffer_size: int = 128 * 1024 * 1024
    log_cleaner_backoff_ms: int = 15_000
    log_cleaner_min_cleanable_ratio: float = 0.5
    log_cleaner_delete_retention_ms: int = 24 * _HOUR_MS
    log_cleaner_min_compaction_lag_ms: int = 0
    log_cleaner_max_compaction_lag_ms: int = (1 << 63) - 1
    message_max_bytes: int = 1_048_588
    socket_request_max_bytes: int = 104_857_600
    max_connections: int = 1000
    queued_max_requests: int = 500
    max_inflight_requests_per_connection: int = 100
    connections_max_idle_ms: int = 600_000  # Kafka's default: 10 minutes
    fetch_sendfile_enable: bool = True
    fetch_purgatory_max_size: int = 10_000
    max_incremental_fetch_session_cache_slots: int = 1000
    fetch_max_bytes: int = 57_671_680  # 55 MiB: the most a consumer's Fetch response carries (KIP-541)
    producer_purgatory_max_size: int = 10_000
    replica_lag_time_max_ms: int = 30_000
    replica_high_watermark_checkpoint_interval_ms: int = 5000
    shutdown_drain_timeout_ms: int = 10_000
    # host:port of the controller; unset means a single node that is its own controller
    controller_bootstrap_servers: str | None = None
    # How this broker logs in to the other nodes (server/inter_broker.py): its own SASL user, by Kafka's
    # mechanism keys; or, on an unsecured cluster, the PLAIN password every node shares.
    inter_broker_secret: str | None = None
    inter_broker_sasl_username: str | None = None
    inter_broker_sasl_password: str | None = None
    sasl_mechanism_inter_broker_protocol: str = "PLAIN"
    sasl_mechanism_controller_protocol: str = "PLAIN"
    broker_heartbeat_interval_ms: int = 2000
    controlled_shutdown_enable: bool = True  # SIGTERM first moves this broker's leaderships away
    # Attempts to reach an unreachable controller on shutdown, and the pause after each failed one (Kafka's
    # defaults): then the broker stops without the handover.
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5_000
    broker_rack: str | None = None
    num_replica_fetchers: int = 1
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes: int = 1_048_576
    replica_fetch_response_max_bytes: int = 10_485_760
    replica_fetch_backoff_ms: int = 1000
    # The replication throttles' rate measurement (KIP-73): samples kept, and each one's span.
    replication_quota_window_num: int = 11
    replication_quota_window_size_seconds: int = 1
    replica_socket_timeout_ms: int = 30_000
    # replog's own key (Kafka has none): the local address of this broker's connections to other brokers and
    # to the controller, e.g. the host of its listener on a multi-homed machine, so peers and firewalls see
    # where a connection comes from. Unset: the address the OS routes from.
    inter_broker_bind_host: str | None = None
    # ACLs (security/authorizer.py): no authorizer class allows every request, as a Kafka broker without one
    authorizer_class_name: str = ""
    super_users: str = ""  # semicolon-separated principals, e.g. User:admin;User:ops
    allow_everyone_if_no_acl_found: bool = False
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    # group.* and offsets.* keys, under Kafka's names (coordinator/config.py)
    group: GroupCoordinatorConfig = field(default_factory=GroupCoordinatorConfig)
    unknown_keys: tuple[str, ...] = ()
    # The keys given in the properties file or overrides: DescribeConfigs' STATIC_BROKER_CONFIG source.
    given_keys: frozenset[str] = frozenset()

    @property
    def controller_address(self) -> tuple[str, int] | None:
        """The first controller of controller.quorum.bootstrap.servers, None without any."""
        addresses = self.controller_addresses
        return addresses[0] if addresses else None

    @property
    def controller_addresses(self) -> list[tuple[str, int]]:
        """Every controller of controller.quorum.bootstrap.servers (host:port,...), in order."""
        if not self.controller_bootstrap_servers:
            return []
        addresses = []
        for item in filter(None, (part.strip() for part in self.controller_bootstrap_servers.split(","))):
            host, _, port = item.rpartition(":")
            addresses.append((host.strip("[]"), int(port)))
        return addresses

    @property
    def listener_specs(self) -> list[ListenerSpec]:
        protocols = effective_protocol_map(self.listener_security_protocol_map, self.controller_listener_names)
        return resolve_listeners(self.listeners, self.advertised_listeners, protocols)

    @property
    def inter_broker_listener(self) -> ListenerSpec:
        return choose_inter_broker_listener(self.listener_specs, self.inter_broker_listener_name)

    @property
    def advertised(self) -> Listener:
        """The inter-broker listener's advertised address: the one registered first with the controller."""
        spec = self.inter_broker_listener
        return Listener(spec.name, spec.advertised_host, spec.advertised_port)

    def file_budget(self) -> FileBudget:
        """The broker's budget of open segment files (log.open.files.max, replog's own key)."""
        limit = self.log_open_files_max
        return FileBudget(default_max_open_files() if limit == -1 else limit)

    def log_config(self) -> LogConfig:
        return LogConfig(
            segment_bytes=self.log_segment_bytes,
            segment_ms=self.log_roll_ms,
            retention_ms=self.log_retention_ms,
            retention_bytes=self.log_retention_bytes,
            index_interval_bytes=self.log_index_interval_bytes,
            segment_index_bytes=self.log_index_size_max_bytes,
            max_message_bytes=self.message_max_bytes,
            cleanup_policy=self.log_cleanup_policy,
            min_cleanable_dirty_ratio=self.log_cleaner_min_cleanable_ratio,
            delete_retention_ms=self.log_cleaner_delete_retention_ms,
            min_compaction_lag_ms=self.log_cleaner_min_compaction_lag_ms,
            max_compaction_lag_ms=self.log_cleaner_max_compaction_lag_ms,
            writeback_interval_bytes=self.log_writeback_interval_bytes,
        )

    def authorizer_config(self) -> AuthorizerConfig:
        return AuthorizerConfig.from_properties(self.authorizer_class_name, self.super_users,
                                                self.allow_everyone_if_no_acl_found)

    def cleaner_config(self) -> CleanerConfig:
        return CleanerConfig(enable=self.log_cleaner_enable, threads=self.log_cleaner_threads,
                             dedupe_buffer_size=self.log_cleaner_dedupe_buffer_size,
                             backoff_ms=self.log_cleaner_backoff_ms)

    def validate(self) -> None:
        if self.log_open_files_max != -1 and self.log_open_files_max < MIN_OPEN_FILES:
            raise ValueError(f"log.open.files.max must be -1 or at least {MIN_OPEN_FILES}")
        if self.socket_request_max_bytes <= 0:
            raise ValueError("socket.request.max.bytes must be positive")
        if self.fetch_max_bytes < MIN_FETCH_MAX_BYTES:
            raise ValueError(f"fetch.max.bytes must be at least {MIN_FETCH_MAX_BYTES}")
        if self.max_incremental_fetch_session_cache_slots < 0:
            raise ValueError("max.incremental.fetch.session.cache.slots must not be negative")
        if self.num_partitions <= 0 or self.default_replication_factor <= 0:
            raise ValueError("num.partitions and default.replication.factor must be positive")
        if not self.log_dirs:
            raise ValueError("log.dirs is empty")
        if self.max_inflight_requests_per_connection <= 0:
            raise ValueError("max.inflight.requests.per.connection must be positive")
        if self.connections_max_idle_ms <= 0:
            raise ValueError("connections.max.idle.ms must be positive")
        if self.broker_heartbeat_interval_ms <= 0:
            raise ValueError("broker.heartbeat.interval.ms must be positive")
        if self.controlled_shutdown_max_retries <= 0 or self.controlled_shutdown_retry_backoff_ms < 0:
            raise ValueError("controlled.shutdown.max.retries must be positive and .retry.backoff.ms not negative")
        self.log_config()  # log.cleanup.policy, log.cleaner.* topic defaults: ValueError when out of range
        self.cleaner_config()
        if self.replica_lag_time_max_ms <= 0 or self.num_replica_fetchers <= 0:
            raise ValueError("replica.lag.time.max.ms and num.replica.fetchers must be positive")
        if self.replication_quota_window_num < 2 or self.replication_quota_window_size_seconds <= 0:
            raise ValueError("replication.quota.window.num must be at least 2 and replication.quota.window.size."
                             "seconds positive")
        if self.controller_bootstrap_servers is not None:
            items = [part.strip() for part in self.controller_bootstrap_servers.split(",") if part.strip()]
            for item in items:
                host, _, port = item.rpartition(":")
                if not host or not port.isdigit() or not 0 < int(port) < 65536:
                    raise ValueError(f"controller.quorum.bootstrap.servers must be host:port,...: {item!r} is not")
            if not items:
                raise ValueError("controller.quorum.bootstrap.servers names no controller")
            if not self.node_identity().has_credentials and not self.inter_broker_listener.protocol.uses_tls:
                raise ValueError(f"a broker with a controller must log in to the other nodes: set "
                                 f"{USERNAME_KEY} and {PASSWORD_KEY} (SASL), use an SSL inter-broker listener with a "
                                 f"keystore (mTLS), or, on an unsecured cluster, inter.broker.secret")
            # ValueError: no credential the listener takes (TLS contexts are loaded when the broker starts)
            node_sasl_credentials(self.inter_broker_listener.protocol, self.node_identity(),
                                  self.sasl_mechanism_inter_broker_protocol, link="the inter-broker listener")
            node_sasl_credentials(self.controller_protocol()[1], self.node_identity(),
                                  self.sasl_mechanism_controller_protocol, link="the controller listener")
        self._validate_listeners()
        self.authorizer_config()  # an unknown authorizer.class.name refuses to start

    def _serves_inter_broker_links(self, listener) -> bool:
        if listener.protocol in (SecurityProtocol.PLAINTEXT, SecurityProtocol.SSL):
            return True  # SASL is optional there: PLAIN for inter.broker.secret only (server/auth.py)
        # Kafka: sasl.mechanism.inter.broker.protocol must be among the listener's sasl.enabled.mechanisms.
        mechanisms = listener_ssl_props(self.security_props, listener.name).get("sasl.enabled.mechanisms", "")
        return self.sasl_mechanism_inter_broker_protocol in (m.strip().upper() for m in mechanisms.split(","))

    def node_identity(self) -> NodeIdentity:
        if (self.inter_broker_sasl_username is None) != (self.inter_broker_sasl_password is None):
            raise ValueError(f"{USERNAME_KEY} and {PASSWORD_KEY} go together")
        return NodeIdentity(f"broker-{self.node_id}", self.inter_broker_sasl_username,
                            self.inter_broker_sasl_password, self.inter_broker_secret or None)

    def cluster_members(self, acls: AclIndex | None = None) -> ClusterMembers:
        """Who may perform cluster actions here: super users, once an authorizer is on or the cluster shares
        inter.broker.secret; anyone otherwise, as Kafka without an authorizer (server/auth.py). acls: the
        metadata image's, which may also grant CLUSTER_ACTION once an authorizer is on."""
        config = self.authorizer_config()
        grants = cluster_action_grants(Authorizer(config, acls)) if config.enabled and acls is not None else None
        return ClusterMembers(config.super_users, restricted=config.enabled or bool(self.inter_broker_secret),
                              acl_allows_cluster_action=grants)

    def broker_link_security(self) -> ClientSecurity:
        """How this broker logs in to the other brokers' inter-broker listener (they all use the same name)."""
        listener = self.inter_broker_listener
        return node_link_security(listener.protocol, self.node_identity(), self.sasl_mechanism_inter_broker_protocol,
                                  self.inter_broker_ssl_context(), link=f"inter-broker listener {listener.name}")

    def controller_protocol(self) -> tuple[str, SecurityProtocol]:
        name = self.controller_listener_names[0] if self.controller_listener_names else "CONTROLLER"
        protocols = effective_protocol_map(self.listener_security_protocol_map, (name,))
        return name, protocols.get(name, SecurityProtocol.PLAINTEXT)

    def controller_link_security(self) -> ClientSecurity:
        """How this broker logs in to the controllers: the protocol of the first of controller.listener.names
        in listener.security.protocol.map (PLAINTEXT without one, as KRaft's default), its listener.name.<l>.ssl.*
        keys for TLS (Kafka's way to configure the controller client)."""
        name, protocol = self.controller_protocol()
        tls = _link_tls(listener_ssl_props(self.security_props, name), f"controller listener {name}") \
            if protocol.uses_tls else None
        return node_link_security(protocol, self.node_identity(), self.sasl_mechanism_controller_protocol, tls,
                                  link=f"controller listener {name}")

    def inter_broker_ssl_context(self) -> ssl.SSLContext | None:
        """TLS to other brokers' inter-broker listeners when ours is SSL or SASL_SSL: every broker of a cluster
        uses the same listener name; trusting its truststore, and presenting its keystore (for mTLS)."""
        listener = self.inter_broker_listener
        if not listener.protocol.uses_tls:
            return None
        return _link_tls(listener_ssl_props(self.security_props, listener.name), f"inter-broker listener {listener.name}")

    def _validate_listeners(self) -> None:
        specs = self.listener_specs
        inter_broker = self.inter_broker_listener
        if bound := [s.name for s in specs if s.name in self.controller_listener_names]:
            # Kafka: a broker-only node does not listen on the controller's listener names.
            raise ValueError(f"listeners must not contain controller.listener.names ({', '.join(bound)})")
        if self.controller_bootstrap_servers is not None and not self._serves_inter_broker_links(inter_broker):
            # The controller and the other brokers reach a broker at its inter-broker address, logging in with
            # sasl.mechanism.inter.broker.protocol on a SASL listener.
            mechanism = self.sasl_mechanism_inter_broker_protocol
            raise ValueError(f"inter.broker.listener.name {inter_broker.name} is {inter_broker.protocol.name}: "
                             f"replog's links between nodes log in with {mechanism} "
                             f"({INTER_BROKER_MECHANISM_KEY}): the listener must have {mechanism} among its "
                             f"sasl.enabled.mechanisms")


def _link_tls(props: dict[str, str], link: str) -> ssl.SSLContext:
    """A client TLS context for a link to other nodes; ValueError names the link and what is wrong."""
    try:
        return client_context(props)
    except (ValueError, OSError) as e:  # ssl.SSLError and a missing file are OSErrors
        reason = e.reason if isinstance(e, ssl.SSLError) and e.reason else e.strerror if isinstance(e, OSError) else e
        raise ValueError(f"TLS to the {link}: {reason or e} (its ssl.keystore.* and ssl.truststore.* keys)") from e


def broker_config_keys() -> dict[str, str]:
    """Each broker config key DescribeConfigs lists, with its attribute: the first key of each attribute
    (log.retention.ms, not its aliases log.retention.minutes and .hours)."""
    keys: dict[str, str] = {}
    for key, (attribute, _) in _KEYS.items():
        if attribute not in keys.values():
            keys[key] = attribute
    return keys


def load_config(path: str | Path | None, overrides: list[str]) -> BrokerConfig:
    return config_from_properties(read_properties(path, overrides))


def config_from_properties(props: dict[str, str]) -> BrokerConfig:
    metrics, props = split_metrics_config(props)
    group_keys = GroupCoordinatorConfig.property_names()
    group = GroupCoordinatorConfig.from_properties({k: v for k, v in props.items() if k in group_keys})
    props = {k: v for k, v in props.items() if k not in group_keys}
    values: dict[str, object] = {"metrics": metrics, "group": group}
    unknown = []
    values["security_props"] = {k: v for k, v in props.items() if is_listener_key(k)}
    for key, raw in props.items():
        if key in values["security_props"]:
            continue
        if key not in _KEYS:
            unknown.append(key)
            continue
        attribute, parser = _KEYS[key]
        try:
            values[attribute] = parser(raw)  # type: ignore[operator]
        except ValueError as e:
            raise ValueError(f"invalid value for {key}: {raw!r} ({e})") from e
    config = BrokerConfig(**values, unknown_keys=tuple(sorted(unknown)),  # type: ignore[arg-type]
                          given_keys=frozenset(k for k in props if k in _KEYS))
    config.validate()
    return config


def report_unknown_keys(config: BrokerConfig) -> None:
    for key in config.unknown_keys:
        print(f"replog: unknown config key {key!r} ignored", file=sys.stderr)
