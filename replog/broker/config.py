"""Broker configuration: a server.properties-style file plus `--override key=value`, Kafka's key names.

Unknown keys are reported (not fatal, as in Kafka, which logs them); malformed values are fatal.
"""

import sys
from dataclasses import dataclass, field
from pathlib import Path

from replog.log.config import LogConfig
from replog.metrics.config import MetricsConfig, split_metrics_config
from replog.server.properties import Listener, parse_bool, parse_listeners, read_properties

_HOUR_MS = 3600 * 1000

# key -> (attribute, parser). Aliases map several Kafka keys onto one attribute.
_KEYS: dict[str, tuple[str, object]] = {
    "node.id": ("node_id", int),
    "broker.id": ("node_id", int),
    "listeners": ("listeners", parse_listeners),
    "advertised.listeners": ("advertised_listeners", parse_listeners),
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
    "message.max.bytes": ("message_max_bytes", int),
    "socket.request.max.bytes": ("socket_request_max_bytes", int),
    "max.connections": ("max_connections", int),
    "queued.max.requests": ("queued_max_requests", int),
    "max.inflight.requests.per.connection": ("max_inflight_requests_per_connection", int),
    "connections.max.idle.ms": ("connections_max_idle_ms", int),
    "fetch.sendfile.enable": ("fetch_sendfile_enable", parse_bool),
    "fetch.purgatory.max.size": ("fetch_purgatory_max_size", int),
    "producer.purgatory.max.size": ("producer_purgatory_max_size", int),
    "replica.lag.time.max.ms": ("replica_lag_time_max_ms", int),
    "replica.high.watermark.checkpoint.interval.ms": ("replica_high_watermark_checkpoint_interval_ms", int),
    "controlled.shutdown.timeout.ms": ("shutdown_drain_timeout_ms", int),
    "controller.quorum.bootstrap.servers": ("controller_bootstrap_servers", str),
    "inter.broker.secret": ("inter_broker_secret", str),
    "broker.heartbeat.interval.ms": ("broker_heartbeat_interval_ms", int),
    "controlled.shutdown.enable": ("controlled_shutdown_enable", parse_bool),
    "broker.rack": ("broker_rack", str),
    "num.replica.fetchers": ("num_replica_fetchers", int),
    "replica.fetch.wait.max.ms": ("replica_fetch_wait_max_ms", int),
    "replica.fetch.min.bytes": ("replica_fetch_min_bytes", int),
    "replica.fetch.max.bytes": ("replica_fetch_max_bytes", int),
    "replica.fetch.response.max.bytes": ("replica_fetch_response_max_bytes", int),
    "replica.fetch.backoff.ms": ("replica_fetch_backoff_ms", int),
    "replica.socket.timeout.ms": ("replica_socket_timeout_ms", int),
    "inter.broker.bind.host": ("inter_broker_bind_host", str),
}


@dataclass(frozen=True)
class BrokerConfig:
    node_id: int = 1
    listeners: list[Listener] = field(default_factory=lambda: parse_listeners("PLAINTEXT://127.0.0.1:9092"))
    advertised_listeners: list[Listener] | None = None
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
    message_max_bytes: int = 1_048_588
    socket_request_max_bytes: int = 104_857_600
    max_connections: int = 1000
    queued_max_requests: int = 500
    max_inflight_requests_per_connection: int = 100
    connections_max_idle_ms: int = 600_000  # Kafka's default: 10 minutes
    fetch_sendfile_enable: bool = True
    fetch_purgatory_max_size: int = 10_000
    producer_purgatory_max_size: int = 10_000
    replica_lag_time_max_ms: int = 30_000
    replica_high_watermark_checkpoint_interval_ms: int = 5000
    shutdown_drain_timeout_ms: int = 10_000
    # host:port of the controller; unset means a single node that is its own controller
    controller_bootstrap_servers: str | None = None
    inter_broker_secret: str | None = None  # SASL/PLAIN password of the inter-broker principal (server/auth.py)
    broker_heartbeat_interval_ms: int = 2000
    controlled_shutdown_enable: bool = True  # SIGTERM first moves this broker's leaderships away
    broker_rack: str | None = None
    num_replica_fetchers: int = 1
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes: int = 1_048_576
    replica_fetch_response_max_bytes: int = 10_485_760
    replica_fetch_backoff_ms: int = 1000
    replica_socket_timeout_ms: int = 30_000
    # replog's own key (Kafka has none): the local address of this broker's connections to other brokers and
    # to the controller, e.g. the host of its listener on a multi-homed machine, so peers and firewalls see
    # where a connection comes from. Unset: the address the OS routes from.
    inter_broker_bind_host: str | None = None
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    unknown_keys: tuple[str, ...] = ()
    # The keys given in the properties file or overrides: DescribeConfigs' STATIC_BROKER_CONFIG source.
    given_keys: frozenset[str] = frozenset()

    @property
    def controller_address(self) -> tuple[str, int] | None:
        if not self.controller_bootstrap_servers:
            return None
        first = self.controller_bootstrap_servers.split(",")[0].strip()
        host, _, port = first.rpartition(":")
        return host, int(port)

    @property
    def advertised(self) -> Listener:
        return (self.advertised_listeners or self.listeners)[0]

    def log_config(self) -> LogConfig:
        return LogConfig(
            segment_bytes=self.log_segment_bytes,
            segment_ms=self.log_roll_ms,
            retention_ms=self.log_retention_ms,
            retention_bytes=self.log_retention_bytes,
            index_interval_bytes=self.log_index_interval_bytes,
            segment_index_bytes=self.log_index_size_max_bytes,
            max_message_bytes=self.message_max_bytes,
        )

    def validate(self) -> None:
        if self.socket_request_max_bytes <= 0:
            raise ValueError("socket.request.max.bytes must be positive")
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
        if self.replica_lag_time_max_ms <= 0 or self.num_replica_fetchers <= 0:
            raise ValueError("replica.lag.time.max.ms and num.replica.fetchers must be positive")
        if self.controller_bootstrap_servers is not None:
            host, _, port = self.controller_bootstrap_servers.split(",")[0].strip().rpartition(":")
            if not host or not port.isdigit():
                raise ValueError("controller.quorum.bootstrap.servers must be host:port")
            if not self.inter_broker_secret:
                raise ValueError("a broker with a controller needs inter.broker.secret to replicate")


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
    values: dict[str, object] = {"metrics": metrics}
    unknown = []
    for key, raw in props.items():
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
