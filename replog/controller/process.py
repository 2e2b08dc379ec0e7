"""`replog controller start`: the controller as a process of its own, configured like a broker.

Keys (Kafka's names where Kafka has one): node.id (the controller id, default 3000), listeners
(NAME://host:port, its protocol from listener.security.protocol.map: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL with
PLAIN; ssl.*, sasl.enabled.mechanisms and listener.name.<l>.* as a broker's listener), metadata.log.dir
(required: the append-only metadata log), how it logs in to the other nodes (inter.broker.secret on an
unsecured cluster, or inter.broker.sasl.username / .password with sasl.mechanism.inter.broker.protocol and
sasl.mechanism.controller.protocol, or its keystore under mTLS: server/inter_broker.py), who may act for the
cluster (super.users, authorizer.class.name: server/auth.py), inter.broker.bind.host, cluster.id, broker.session.timeout.ms, unclean.leader.election.enable, num.partitions,
default.replication.factor, metadata.log.max.record.bytes.between.snapshots (KIP-630, 20 MiB),
bootstrap.scram.credentials (the cluster's first SCRAM users, written into the metadata log on its first start,
as `kafka-storage format --add-scram`: SCRAM-SHA-512=[name=admin,salt=<b64>,saltedpassword=<b64>,iterations=N]
or [name=admin,password=...]),
auto.leader.rebalance.enable, leader.imbalance.check.interval.seconds, security.inter.broker.protocol (SSL or SASL_SSL:
reach the brokers over TLS, trusting ssl.truststore.*, presenting ssl.keystore.* if set),
leader.imbalance.per.broker.percentage, and the metrics.* keys brokers take (metrics.port,
metrics.dump.dir, ...; the dumps default to metadata.log.dir/metrics-dumps), and the quorum's keys with Kafka's
names and defaults: controller.quorum.voters (id@host:port,...; node.id among them; this controller alone by
default), controller.quorum.election.timeout.ms (1000), controller.quorum.fetch.timeout.ms (2000),
controller.quorum.election.backoff.max.ms (1000), controller.quorum.request.timeout.ms (2000). The metadata
log and the quorum-state file are in metadata.log.dir/__cluster_metadata-0. Runs until SIGTERM or SIGINT, then
stops cleanly (exit 0).
"""

import asyncio
import dataclasses
import logging
import signal
import ssl
import sys
from pathlib import Path

from replog.metrics.config import split_metrics_config
from replog.process_startup import end_quiet_start
from replog.raft import config as quorum_keys_module
from replog.raft.config import quorum_config_from_properties
from replog.raft.file_log import CorruptRaftLogError
from replog.raft.quorum_state_file import CorruptQuorumStateError, VoterSetMismatchError
from replog.security.authorizer import AuthorizerConfig
from replog.server.auth import ClusterMembers
from replog.server.inter_broker import (
    CONTROLLER_MECHANISM_KEY,
    INTER_BROKER_MECHANISM_KEY,
    NODE_LOGIN_KEYS,
    NodeIdentity,
    node_link_security,
    parse_node_mechanism,
)
from replog.server.listener_config import ListenerSpec, SecurityProtocol, resolve_server_listeners
from replog.server.listener_security import build_listener_security, is_listener_key
from replog.server.listener_socket import write_ready_file
from replog.server.parent_watch import stop_when_parent_exits
from replog.server.properties import parse_bool, parse_listeners, read_properties
from replog.server.sasl import SCRAM_MECHANISMS
from replog.server.scram_credentials import parse_bootstrap_credentials
from replog.server.tls import client_context, listener_ssl_props

from .quorum import controller_quorum_config
from .records import CorruptMetadataError
from .server import ClusterController, ControllerConfig

log = logging.getLogger(__name__)

QUORUM_PREFIX = "controller.quorum."
QUORUM_KEYS = frozenset({quorum_keys_module.VOTERS, quorum_keys_module.BOOTSTRAP_SERVERS,
                         quorum_keys_module.ELECTION_TIMEOUT_MS, quorum_keys_module.FETCH_TIMEOUT_MS, quorum_keys_module.ELECTION_BACKOFF_MAX_MS,
                         quorum_keys_module.REQUEST_TIMEOUT_MS, quorum_keys_module.RETRY_BACKOFF_MS})
_KEYS = {
    "node.id": ("controller_id", int),
    "cluster.id": ("cluster_id", str),
    "metadata.log.dir": ("metadata_log_dir", Path),
    "inter.broker.secret": ("inter_broker_secret", str),
    # The local address of its connections to the other voters and to brokers (a broker's key of that name).
    "inter.broker.bind.host": ("inter_broker_bind_host", str),
    "broker.session.timeout.ms": ("broker_session_timeout_ms", int),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", parse_bool),
    "auto.leader.rebalance.enable": ("auto_leader_rebalance_enable", parse_bool),
    "leader.imbalance.check.interval.seconds": ("leader_imbalance_check_interval_ms", lambda v: int(v) * 1000),
    "leader.imbalance.per.broker.percentage": ("leader_imbalance_per_broker_percentage", int),
    "num.partitions": ("num_partitions", int),
    "default.replication.factor": ("default_replication_factor", int),
    "metadata.log.max.record.bytes.between.snapshots": ("metadata_snapshot_max_bytes", int),
    # replog's form of `kafka-storage format --add-scram`: SCRAM-SHA-512=[name=admin,password=...],... (KIP-554)
    "bootstrap.scram.credentials": ("bootstrap_scram_credentials",
                                    lambda v: tuple(parse_bootstrap_credentials(v))),
}


_LISTENER_KEYS = ("advertised.listeners", "listener.security.protocol.map", "controller.listener.names")
DEFAULT_LISTENER = "PLAINTEXT://127.0.0.1:9093"
_MEMBER_KEYS = ("super.users", "authorizer.class.name", "allow.everyone.if.no.acl.found")
# How the controller reaches the brokers' inter-broker listeners: Kafka's key, PLAINTEXT, SSL, SASL_PLAINTEXT or
# SASL_SSL (trusting ssl.truststore.*, presenting ssl.keystore.*).
INTER_BROKER_PROTOCOL_KEY = "security.inter.broker.protocol"


def _broker_protocol(props: dict[str, str]) -> SecurityProtocol:
    protocol = props.get(INTER_BROKER_PROTOCOL_KEY, "PLAINTEXT").strip().upper()
    if protocol not in SecurityProtocol.__members__:
        raise ValueError(f"{INTER_BROKER_PROTOCOL_KEY}={protocol}: expected PLAINTEXT, SASL_PLAINTEXT, SSL or "
                         f"SASL_SSL")
    return SecurityProtocol[protocol]


def _broker_ssl_context(props: dict[str, str]) -> ssl.SSLContext | None:
    if not _broker_protocol(props).uses_tls:
        return None
    return client_context({k: v for k, v in props.items() if k.startswith("ssl.")})


def _controller_listener(props: dict[str, str]) -> ListenerSpec:
    """The controller's listener, its protocol from listener.security.protocol.map as a broker's. A controller
    node's listeners are all controller listeners (Kafka requires that of process.roles=controller), so without
    controller.listener.names they are the ones named, and an unmapped name is PLAINTEXT as in KRaft."""
    if not props.get("controller.listener.names"):
        names = ",".join(listener.name for listener in parse_listeners(props.get("listeners", DEFAULT_LISTENER)))
        props = {**props, "controller.listener.names": names}
    return resolve_server_listeners(props, DEFAULT_LISTENER)[0]


def _authorizer_config(props: dict[str, str]) -> AuthorizerConfig:
    return AuthorizerConfig.from_properties(props.get("authorizer.class.name", ""), props.get("super.users", ""),
                                            parse_bool(props.get("allow.everyone.if.no.acl.found", "false")))


def _cluster_members(props: dict[str, str]) -> ClusterMembers:
    authorizer = _authorizer_config(props)
    return ClusterMembers(authorizer.super_users,
                          restricted=authorizer.enabled or bool(props.get("inter.broker.secret")))


def controller_security_fields(props: dict[str, str]) -> dict[str, object]:
    """The ControllerConfig fields of its security from its properties: the listener's TLS and SASL, who may
    act for the cluster, and how it logs in to the brokers and the other voters (server/inter_broker.py).
    ValueError names what is wrong."""
    values: dict[str, object] = {}
    listener = _controller_listener(props)
    members = _cluster_members(props)
    values["members"] = members
    values["authorizer"] = _authorizer_config(props)
    values["listener_security"] = build_listener_security(listener, props, None, members)
    if listener.protocol.uses_sasl:
        # The controllers' listener cannot take SCRAM: its credentials live in the log it serves (KAFKA-15513).
        offered = values["listener_security"].sasl.mechanisms  # type: ignore[attr-defined]
        if scram := [m for m in offered if m in SCRAM_MECHANISMS]:
            raise ValueError(f"listener {listener.name}: a controller cannot offer {', '.join(scram)} (its "
                             f"credentials are in the metadata log it serves); use PLAIN over TLS or mTLS")
    identity = NodeIdentity.from_properties(f"controller-{props.get('node.id', '3000')}", props,
                                            props.get("inter.broker.secret"))
    if not identity.has_credentials and not listener.protocol.uses_tls:
        raise ValueError("a controller must log in to the other nodes: set inter.broker.sasl.username and "
                         "inter.broker.sasl.password, use SSL listeners with a keystore (mTLS), or, on an "
                         "unsecured cluster, inter.broker.secret")
    controller_tls = (client_context(listener_ssl_props(props, listener.name)) if listener.protocol.uses_tls
                      else None)
    values["controller_link"] = node_link_security(
        listener.protocol, identity, parse_node_mechanism(props, CONTROLLER_MECHANISM_KEY), controller_tls,
        link=f"controller listener {listener.name}")
    values["broker_link"] = node_link_security(
        _broker_protocol(props), identity, parse_node_mechanism(props, INTER_BROKER_MECHANISM_KEY),
        _broker_ssl_context(props), link=f"the brokers' listener ({INTER_BROKER_PROTOCOL_KEY})")
    return values


def controller_config(props: dict[str, str]) -> ControllerConfig:
    """The controller's configuration from properties; ValueError names what is wrong."""
    values: dict[str, object] = {}
    values["metrics"], rest = split_metrics_config(props)
    quorum_keys = {key: raw for key, raw in rest.items() if key.startswith(QUORUM_PREFIX)}
    for key, raw in rest.items():
        if key in quorum_keys:
            if key not in QUORUM_KEYS:
                print(f"replog: unknown controller config key {key!r} ignored", file=sys.stderr)
            continue
        if key == "listeners":
            listener = _controller_listener(rest)
            values["host"], values["port"] = listener.host, listener.port
        elif (key in _LISTENER_KEYS or key in _MEMBER_KEYS or key in NODE_LOGIN_KEYS or key.startswith("ssl.")
              or is_listener_key(key)):
            continue  # read by controller_security_fields
        elif key == INTER_BROKER_PROTOCOL_KEY:
            values["broker_ssl_context"] = _broker_ssl_context(rest)
        elif key in _KEYS:
            attribute, parse = _KEYS[key]
            try:
                values[attribute] = parse(raw)
            except ValueError as e:
                raise ValueError(f"invalid value for {key}: {raw!r} ({e})") from e
        else:
            print(f"replog: unknown controller config key {key!r} ignored", file=sys.stderr)
    if not props.get("metadata.log.dir"):
        raise ValueError("metadata.log.dir is required")
    values |= controller_security_fields(rest)
    if int(values.get("leader_imbalance_check_interval_ms", 1)) <= 0:
        raise ValueError("leader.imbalance.check.interval.seconds must be positive")
    if not 0 <= int(values.get("leader_imbalance_per_broker_percentage", 10)) <= 100:
        raise ValueError("leader.imbalance.per.broker.percentage must be between 0 and 100")
    if int(values.get("metadata_snapshot_max_bytes", 1)) <= 0:
        raise ValueError("metadata.log.max.record.bytes.between.snapshots must be positive")
    if int(values.get("broker_session_timeout_ms", 1)) <= 0:
        raise ValueError("broker.session.timeout.ms must be positive")
    if int(values.get("num_partitions", 1)) <= 0 or int(values.get("default_replication_factor", 1)) <= 0:
        raise ValueError("num.partitions and default.replication.factor must be positive")
    config = ControllerConfig(**values)  # type: ignore[arg-type]
    known = {key: raw for key, raw in quorum_keys.items() if key in QUORUM_KEYS}
    if known:
        # Without voters, the default quorum: this controller alone, on its listener.
        known.setdefault(quorum_keys_module.VOTERS, f"{config.controller_id}@{config.host}:{config.port}")
        config = dataclasses.replace(config, quorum=quorum_config_from_properties(known))  # errors name the key
    quorum = controller_quorum_config(config.controller_id, config.host, config.port, config.quorum)
    voter_port = quorum.voters[config.controller_id][1]
    if config.port and voter_port != config.port:  # the other voters could never reach this one
        raise ValueError(f"controller.quorum.voters: voter {config.controller_id} at port {voter_port}, but its "
                         f"listener is on {config.port}")
    return config


async def serve_controller(config: ControllerConfig) -> None:
    controller = ClusterController(config)
    await controller.start()
    write_ready_file(port=controller.port, metrics_port=controller.metrics_service.port)
    end_quiet_start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    stop_when_parent_exits(loop, stop.set)
    await stop.wait()
    await controller.stop()


def run_controller(config_path: str | None, overrides: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = controller_config(read_properties(config_path, overrides))
    except (OSError, ValueError) as e:
        print(f"replog: bad controller configuration: {e}", file=sys.stderr)
        return 2
    try:
        import uvloop
    except ImportError:
        run = asyncio.run
    else:
        run = uvloop.run
    try:
        run(serve_controller(config))
    except (CorruptQuorumStateError, VoterSetMismatchError, CorruptRaftLogError, CorruptMetadataError) as e:
        print(f"replog: the controller cannot start: {e}", file=sys.stderr)  # each names its file
        return 1
    return 0
