"""`replog cluster ...`: controllers and brokers as detached local processes, described by DIR/cluster.json.

The controllers (ids 3000, 3001, ...; three by default) are the voters of the metadata quorum (KIP-595): the
active controller is the quorum's leader, and every broker bootstraps from all of them. `up` binds every node's listening socket itself (on ports the OS picks, or --base-port P, P+1, ...), writes
each node's properties file with its port (mode 0600: it holds the inter-broker secret), starts every node in
a session of its own with its socket handed down, so it outlives the command and no other process can take
the port in between, records the nodes in cluster.json and waits until each serves (writes DIR/<node>.ready)
a controller is active and each broker's metadata lists all the brokers (so each has registered with it). The other commands act on the pids recorded there; a
restarted node binds the port in its properties. A pid counts as the node only while /proc/<pid>/cmdline
equals the recorded argv (replog/harness/processes.py). cluster.json is replaced atomically.
"""

import asyncio
import socket
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .client import BrokerInfo
from .client.quorum_admin import QuorumInfo
from .cluster_nodes.manifest import (
    CLUSTER_FILE,
    ClusterError,
    ClusterManifest,
    Node,
    Role,
    load_manifest,
    save_manifest,
)
from .cluster_nodes.nodes import (
    STOP_TIMEOUT_S,
    active_controller,
    kill_nodes,
    launch,
    metadata_brokers,
    stop_nodes,
    wait_until_active_controller,
    wait_until_registered,
    wait_until_serving,
)
from .cluster_nodes.plan import (
    DEFAULT_CONTROLLERS,
    added_broker_properties,
    base_ports,
    format_properties,
    node_argv,
    plan_cluster,
)
from .cluster_nodes.quorum_report import quorum_json, table
from .cluster_nodes.security import (
    CLIENT_PROPERTIES,
    apply_security,
    cluster_client_security,
    cluster_controller_security,
    secure_added_broker,
    secure_cluster,
    write_client_properties,
)
from .harness.metrics_layout import METRICS_DIR
from .harness.probes import answers_api_versions
from .harness.processes import HOST, StopOutcome, is_running_as, listening_socket, read_ready_file
from .log.checkpoint import write_atomically
from .server.properties import read_properties

READY_TIMEOUT_S = 30.0


# commands


def cluster_up(
    root: str | Path,
    brokers: int,
    *,
    controllers: int = DEFAULT_CONTROLLERS,
    base_port: int | None = None,
    broker_overrides: Mapping[str, str] | None = None,
    controller_overrides: Mapping[str, str] | None = None,
    timeout: float = READY_TIMEOUT_S,
    security: str = "plaintext",
) -> ClusterManifest:
    """Start the controllers and brokers; returns once they form a cluster, or kills them and raises.
    security: plaintext, sasl_ssl or ssl (cluster_nodes/security.py: certificates, the admin user, listeners,
    DIR/client.properties)."""
    root = Path(root).resolve()
    if (root / CLUSTER_FILE).exists():
        if live := [n for n in load_manifest(root).nodes if is_running_as(n.pid, n.argv)]:
            names = ", ".join(f"{n.name} (pid {n.pid})" for n in live)
            raise ClusterError(f"{root} holds a running cluster ({names}): `replog cluster down` it first")
    nodes = controllers + brokers
    node_ports, metrics_ports = ([0] * nodes, None) if base_port is None else base_ports(nodes, base_port)
    if metrics_ports is not None:
        # Explicit metrics ports are bound by the nodes; a stranger on one would serve in a node's place.
        _check_ports_free(metrics_ports)
    listeners = _hold_listeners(node_ports)
    try:
        manifest, properties = plan_cluster(
            root,
            brokers,
            [listener.getsockname()[1] for listener in listeners],
            controllers=controllers,
            metrics_ports=metrics_ports,
            broker_overrides=broker_overrides,
            controller_overrides=controller_overrides,
        )
        root.mkdir(parents=True, exist_ok=True)
        secured = secure_cluster(manifest, security)
        properties = apply_security(properties, secured)
        write_client_properties(root, secured)
        for node in manifest.nodes:
            write_atomically(manifest.config_path(node), format_properties(properties[node.name]).encode(), 0o600)
        _start(manifest, listeners, time.monotonic() + timeout)
    finally:
        for listener in listeners:
            listener.close()  # the nodes have their own copies
    return manifest


def _hold_listeners(ports: Sequence[int]) -> list[socket.socket]:
    """A listening socket per node, held from now on: no other process can take a port before its node
    serves on it (0: a port the OS picks)."""
    listeners: list[socket.socket] = []
    try:
        for port in ports:
            listeners.append(listening_socket(HOST, port))
    except OSError as e:
        for listener in listeners:
            listener.close()
        raise ClusterError(f"port {port} on {HOST} is not free: {e.strerror}") from None
    return listeners


def _start(manifest: ClusterManifest, listeners: Sequence[socket.socket], deadline: float) -> None:
    """Launch every node on its socket and wait until the cluster has formed; on any failure, kill them."""
    try:
        for node, listener in zip(manifest.nodes, listeners, strict=True):
            launch(manifest, node, listener)
        save_manifest(manifest)
        wait_until_serving(manifest, manifest.nodes, deadline)
        asyncio.run(wait_until_active_controller(manifest, deadline, cluster_controller_security(manifest.root)))
        asyncio.run(wait_until_registered(manifest, deadline, cluster_client_security(manifest.root)))
    except BaseException:
        kill_nodes(manifest.nodes)  # the cluster never formed: nothing worth a graceful shutdown
        save_manifest(manifest)
        raise


def _check_ports_free(ports: Iterable[int]) -> None:
    for port in ports:
        with socket.socket() as s:
            try:
                s.bind((HOST, port))
            except OSError as e:
                raise ClusterError(f"port {port} on {HOST} is not free: {e.strerror}") from None


@dataclass(frozen=True, slots=True)
class NodeStatus:
    node: Node
    alive: bool  # the recorded pid runs the recorded argv
    serving: bool  # answers ApiVersions on its port


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    nodes: list[NodeStatus]
    metadata_brokers: dict[int, BrokerInfo] | None  # as a serving broker's Metadata lists them
    quorum: QuorumInfo | None = None  # as the quorum's leader answers DescribeQuorum; None if none answers

    @property
    def all_up(self) -> bool:
        return all(s.alive and s.serving for s in self.nodes)

    def is_active(self, node: Node) -> bool:
        """The active controller is the metadata quorum's leader (KIP-631)."""
        return node.role is Role.CONTROLLER and self.quorum is not None and self.quorum.leader_id == node.id


def cluster_status(root: str | Path) -> ClusterStatus:
    manifest = load_manifest(root)
    security = cluster_client_security(manifest.root)
    controller_security = cluster_controller_security(manifest.root)
    tls = {Role.BROKER: None if security is None else security.ssl_context,
           Role.CONTROLLER: None if controller_security is None else controller_security.ssl_context}
    statuses = [NodeStatus(n, is_running_as(n.pid, n.argv), answers_api_versions(HOST, n.port, ssl_context=tls[n.role]))
                for n in manifest.nodes]
    serving = ",".join(f"{HOST}:{s.node.port}" for s in statuses if s.serving and s.node.role is Role.BROKER)
    controllers = [(HOST, s.node.port) for s in statuses if s.serving and s.node.role is Role.CONTROLLER]
    return ClusterStatus(statuses, asyncio.run(metadata_brokers(serving, security)) if serving else None,
                         asyncio.run(active_controller(controllers, controller_security)) if controllers else None)


def cluster_down(root: str | Path, timeout: float = STOP_TIMEOUT_S) -> dict[str, StopOutcome]:
    """Stop the brokers (in parallel, each moving its leaderships away), then the controllers; idempotent."""
    manifest = load_manifest(root)
    try:
        outcomes = stop_nodes(manifest.brokers, timeout)
        outcomes |= stop_nodes(manifest.controllers, timeout)
    finally:
        save_manifest(manifest)
    return outcomes


def stop_node(root: str | Path, node_id: int, timeout: float = STOP_TIMEOUT_S) -> StopOutcome:
    """SIGTERM one node (a broker first moves its leaderships away) and wait; SIGKILL at the timeout."""
    manifest = load_manifest(root)
    node = manifest.node(node_id)
    try:
        return stop_nodes([node], timeout)[node.name]
    finally:
        save_manifest(manifest)


def kill_node(root: str | Path, node_id: int) -> StopOutcome:
    """SIGKILL one node, as a crash would, and wait until it is gone."""
    manifest = load_manifest(root)
    node = manifest.node(node_id)
    try:
        return kill_nodes([node])[node.name]
    finally:
        save_manifest(manifest)


def add_broker(root: str | Path, timeout: float = READY_TIMEOUT_S) -> Node:
    """Start a broker with the next id, configured as the first broker is, so the cluster grows (partitions
    move onto it with `replog reassign`); returns once every broker's metadata lists it."""
    manifest = load_manifest(root)
    if not manifest.brokers:
        raise ClusterError(f"{manifest.root / CLUSTER_FILE} lists no broker to copy the configuration from")
    template = read_properties(manifest.config_path(manifest.brokers[0]), [])
    listener = _hold_listeners([0])[0]
    try:
        node_id = max(b.id for b in manifest.brokers) + 1
        node = Node(node_id, Role.BROKER, listener.getsockname()[1], manifest.root / f"broker-{node_id}", [])
        node.argv = node_argv(Role.BROKER, manifest.config_path(node))
        properties = added_broker_properties(template, manifest.root, node)
        if (manifest.root / CLIENT_PROPERTIES).exists():  # written by `cluster up --security`
            properties |= secure_added_broker(manifest.root, node)  # its own certificate, from DIR/tls/ca.key
        write_atomically(manifest.config_path(node), format_properties(properties).encode(), 0o600)
        manifest.brokers.append(node)
        _start_added(manifest, node, listener, time.monotonic() + timeout)
    finally:
        listener.close()  # the broker has its own copy
    return node


def _start_added(manifest: ClusterManifest, node: Node, listener: socket.socket, deadline: float) -> None:
    try:
        launch(manifest, node, listener)
        save_manifest(manifest)  # recorded before waiting, so `down` finds the broker even if we are interrupted
        wait_until_serving(manifest, [node], deadline)
        asyncio.run(wait_until_registered(manifest, deadline, cluster_client_security(manifest.root)))
    except BaseException:
        kill_nodes([node])
        save_manifest(manifest)
        raise


def start_node(root: str | Path, node_id: int, timeout: float = READY_TIMEOUT_S) -> Node:
    """Start a node again from its recorded argv (same id, port and data, log appended); wait until it serves."""
    manifest = load_manifest(root)
    node = manifest.node(node_id)
    if is_running_as(node.pid, node.argv):
        raise ClusterError(f"{node.name} is already running (pid {node.pid})")
    launch(manifest, node, None)  # it binds the port in its properties again
    save_manifest(manifest)  # recorded before waiting, so `down` finds the node even if we are interrupted
    try:
        wait_until_serving(manifest, [node], time.monotonic() + timeout)
    except BaseException:
        kill_nodes([node])
        save_manifest(manifest)
        raise
    return node


# output


def metrics_url(manifest: ClusterManifest, node: Node) -> str:
    """The node's Prometheus endpoint, as the node reported it when it last started serving."""
    ready = read_ready_file(manifest.ready_path(node))
    return "-" if ready is None or ready.metrics_port is None else f"http://{HOST}:{ready.metrics_port}/metrics"


def format_nodes(manifest: ClusterManifest) -> str:
    rows = [("NODE", "ROLE", "PID", "PORT", "METRICS", "DATA DIR", "LOG")]
    rows += [
        (str(n.id), str(n.role), str(n.pid or "-"), str(n.port), metrics_url(manifest, n), str(n.data_dir),
         str(manifest.log_path(n)))
        for n in manifest.nodes
    ]
    return table(rows) + f"\nmetrics dumps: {manifest.root / METRICS_DIR}"


def format_status(status: ClusterStatus) -> str:
    rows = [("NODE", "ROLE", "PID", "PORT", "ALIVE", "SERVING")]
    rows += [
        (
            str(s.node.id),
            f"{s.node.role}(active)" if status.is_active(s.node) else str(s.node.role),
            str(s.node.pid or "-"),
            str(s.node.port),
            _yes(s.alive),
            _yes(s.serving),
        )
        for s in status.nodes
    ]
    if status.metadata_brokers is None:
        listed = "unknown (no broker answers Metadata)"
    else:
        listed = ", ".join(
            f"{b.node_id} ({b.host}:{b.port})"
            for b in sorted(status.metadata_brokers.values(), key=lambda b: b.node_id)
        )
    if status.quorum is None:
        quorum = "unknown (no controller answers DescribeQuorum as leader)"
    else:
        q = status.quorum
        quorum = f"leader {q.leader_id}, epoch {q.leader_epoch}, high watermark {q.high_watermark}"
    return f"{table(rows)}\nmetadata quorum: {quorum}\nbrokers in the cluster metadata: {listed or 'none'}"


def status_json(status: ClusterStatus) -> dict:
    """`cluster status --json` (issue 19): every node with its role and liveness, and the quorum."""
    return {
        "nodes": [
            {"id": s.node.id, "role": str(s.node.role), "active": status.is_active(s.node), "alive": s.alive,
             "serving": s.serving, "pid": s.node.pid, "port": s.node.port}
            for s in status.nodes
        ],
        "quorum": quorum_json(status.quorum),
    }


def format_outcomes(outcomes: Mapping[str, StopOutcome]) -> str:
    return "\n".join(f"{name}: {outcome}" for name, outcome in outcomes.items())


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"
