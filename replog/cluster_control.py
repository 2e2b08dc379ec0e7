"""`replog cluster ...`: a controller and N brokers as detached local processes, described by DIR/cluster.json.

`up` binds every node's listening socket itself (on ports the OS picks, or --base-port P, P+1, ...), writes
each node's properties file with its port (mode 0600: it holds the inter-broker secret), starts every node in
a session of its own with its socket handed down, so it outlives the command and no other process can take
the port in between, records the nodes in cluster.json and waits until each serves (writes DIR/<node>.ready)
and each broker's metadata lists all the brokers. The other commands act on the pids recorded there; a
restarted node binds the port in its properties. A pid counts as the node only while /proc/<pid>/cmdline
equals the recorded argv (replog/harness/processes.py). cluster.json is replaced atomically.
"""

import asyncio
import json
import secrets
import socket
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from .client import Admin, BrokerInfo, KafkaError
from .harness.metrics_layout import METRICS_DIR, metrics_properties
from .harness.probes import answers_api_versions
from .harness.processes import (
    HOST,
    KILL_TIMEOUT_S,
    ExitedBeforeReady,
    NotReadyInTime,
    RecordedProcess,
    StillRunning,
    StopOutcome,
    is_running_as,
    kill_processes,
    listening_socket,
    output_tail,
    read_ready_file,
    stop_processes,
    wait_until_exec_done,
    wait_until_ready,
)
from .harness.processes import launch as launch_process
from .log.checkpoint import write_atomically

CLUSTER_FILE = "cluster.json"
CONTROLLER_ID = 3000  # the controller's node.id default; brokers are 1..N
MAX_BROKERS = 32  # each broker is a Python process on this machine
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0  # SIGTERM starts a controlled shutdown, which moves leaderships away first
POLL_INTERVAL_S = 0.05
METADATA_TIMEOUT_S = 2.0  # one Metadata round trip while polling
# `up` derives these from each node's identity and place; an override would break the cluster.
MANAGED_KEYS = frozenset(
    {
        "node.id",
        "broker.id",
        "listeners",
        "log.dirs",
        "log.dir",
        "metadata.log.dir",
        "controller.quorum.bootstrap.servers",
        "inter.broker.secret",
        "metrics.port",
        "metrics.dump.dir",
    }
)


class ClusterError(Exception):
    """A cluster command failed; the message says why, with the relevant node's log tail when there is one."""


class Role(StrEnum):
    CONTROLLER = "controller"
    BROKER = "broker"


@dataclass(slots=True)
class Node:
    id: int
    role: Role
    port: int
    data_dir: Path
    argv: list[str]
    pid: int | None = None

    @property
    def name(self) -> str:
        return "controller" if self.role is Role.CONTROLLER else f"broker-{self.id}"

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "pid": self.pid,
            "port": self.port,
            "data_dir": str(self.data_dir),
            "argv": list(self.argv),
        }

    @classmethod
    def from_json(cls, role: Role, data: Mapping) -> "Node":
        return cls(
            int(data["id"]),
            role,
            int(data["port"]),
            Path(data["data_dir"]),
            [str(a) for a in data["argv"]],
            None if data["pid"] is None else int(data["pid"]),
        )


@dataclass(slots=True)
class ClusterManifest:
    """What cluster.json records: enough to find, stop and restart every node by hand."""

    root: Path
    controller: Node
    brokers: list[Node]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{HOST}:{b.port}" for b in self.brokers)

    @property
    def nodes(self) -> list[Node]:
        return [self.controller, *self.brokers]

    def node(self, node_id: int) -> Node:
        for node in self.nodes:
            if node.id == node_id:
                return node
        known = ", ".join(str(n.id) for n in self.nodes)
        raise ClusterError(f"no node {node_id} in {self.root / CLUSTER_FILE} (nodes: {known})")

    def config_path(self, node: Node) -> Path:
        return self.root / f"{node.name}.properties"

    def log_path(self, node: Node) -> Path:
        return self.root / f"{node.name}.log"

    def ready_path(self, node: Node) -> Path:
        """Written by the node once it serves: its pid and ports (replog/server/listener_socket.py)."""
        return self.root / f"{node.name}.ready"

    def to_json(self) -> dict:
        return {
            "bootstrap": self.bootstrap,
            "controller": self.controller.to_json(),
            "brokers": [b.to_json() for b in self.brokers],
        }

    @classmethod
    def from_json(cls, root: Path, data: Mapping) -> "ClusterManifest":
        return cls(
            root,
            Node.from_json(Role.CONTROLLER, data["controller"]),
            [Node.from_json(Role.BROKER, b) for b in data["brokers"]],
        )


# planning: ports, properties, argv


def base_ports(nodes: int, base_port: int) -> tuple[list[int], list[int]]:
    """--base-port P: the nodes listen on P, P+1, ... and serve metrics on the ports after those."""
    assert nodes > 0
    if not 0 < base_port <= 65536 - 2 * nodes:
        raise ValueError(f"--base-port {base_port} leaves no room for {2 * nodes} ports below 65536")
    ports = list(range(base_port, base_port + 2 * nodes))
    return ports[:nodes], ports[nodes:]


def controller_properties(
    node_id: int, port: int, data_dir: Path, secret: str, metrics: Mapping[str, str], overrides: Mapping[str, str]
) -> dict[str, str]:
    return {
        "node.id": str(node_id),
        "listeners": f"PLAINTEXT://{HOST}:{port}",
        "metadata.log.dir": str(data_dir),
        "inter.broker.secret": secret,
        **metrics,
        **overrides,
    }


def broker_properties(
    node_id: int,
    port: int,
    data_dir: Path,
    controller_port: int,
    secret: str,
    metrics: Mapping[str, str],
    overrides: Mapping[str, str],
) -> dict[str, str]:
    return {
        "node.id": str(node_id),
        "listeners": f"PLAINTEXT://{HOST}:{port}",
        "log.dirs": str(data_dir),
        "controller.quorum.bootstrap.servers": f"{HOST}:{controller_port}",
        "inter.broker.secret": secret,
        **metrics,
        **overrides,
    }


def format_properties(props: Mapping[str, str]) -> str:
    for key, value in props.items():
        if "\n" in key or "\n" in value or "\r" in key or "\r" in value:
            raise ValueError(f"line break in property {key!r}")  # it would smuggle in another key
    return "# written by `replog cluster up`\n" + "".join(f"{k}={v}\n" for k, v in props.items())


def node_argv(role: Role, config_path: Path, python: str = sys.executable) -> list[str]:
    return [python, "-m", "replog", str(role), "start", "--config", str(config_path)]


def plan_cluster(
    root: Path,
    brokers: int,
    node_ports: Sequence[int],
    *,
    metrics_ports: Sequence[int] | None = None,
    broker_overrides: Mapping[str, str] | None = None,
    controller_overrides: Mapping[str, str] | None = None,
    secret: str | None = None,
    python: str = sys.executable,
) -> tuple[ClusterManifest, dict[str, dict[str, str]]]:
    """The nodes of a new cluster (pids not yet known) and each node's properties, by node name. node_ports
    and metrics_ports are the controller's, then broker 1's, ...; metrics ports default to 0 (any, reported
    in the node's ready file)."""
    if not 1 <= brokers <= MAX_BROKERS:
        raise ValueError(f"--brokers must be between 1 and {MAX_BROKERS}, got {brokers}")
    metrics_ports = [0] * (brokers + 1) if metrics_ports is None else list(metrics_ports)
    assert len(node_ports) == len(metrics_ports) == brokers + 1, (node_ports, metrics_ports)
    broker_overrides = dict(broker_overrides or {})
    controller_overrides = dict(controller_overrides or {})
    if managed := sorted(MANAGED_KEYS & (broker_overrides.keys() | controller_overrides.keys())):
        raise ValueError(f"`replog cluster up` sets {', '.join(managed)} itself; do not override them")
    root = Path(root).resolve()
    secret = secret or secrets.token_hex(16)
    controller = Node(CONTROLLER_ID, Role.CONTROLLER, node_ports[0], root / "controller", [])
    nodes = [Node(i, Role.BROKER, node_ports[i], root / f"broker-{i}", []) for i in range(1, brokers + 1)]
    manifest = ClusterManifest(root, controller, nodes)
    properties = {
        controller.name: controller_properties(
            controller.id, controller.port, controller.data_dir, secret,
            metrics_properties(root, controller.name, metrics_ports[0]), controller_overrides,
        )
    }
    for i, b in enumerate(manifest.brokers, start=1):
        properties[b.name] = broker_properties(
            b.id, b.port, b.data_dir, controller.port, secret,
            metrics_properties(root, b.name, metrics_ports[i]), broker_overrides,
        )
    for node in manifest.nodes:
        node.argv = node_argv(node.role, manifest.config_path(node), python)
    return manifest, properties


# files


def save_manifest(manifest: ClusterManifest) -> None:
    text = json.dumps(manifest.to_json(), indent=2) + "\n"
    write_atomically(manifest.root / CLUSTER_FILE, text.encode())


def load_manifest(root: str | Path) -> ClusterManifest:
    root = Path(root).resolve()
    path = root / CLUSTER_FILE
    try:
        data = json.loads(path.read_text())
        return ClusterManifest.from_json(root, data)
    except FileNotFoundError:
        raise ClusterError(f"{path} not found: no cluster was started with --data-dir {root}") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ClusterError(f"{path} is unreadable: {e!r}") from None


# processes


def _process(node: Node) -> RecordedProcess:
    return RecordedProcess(node.pid, node.argv)


def launch(manifest: ClusterManifest, node: Node, listener: socket.socket | None) -> None:
    """Start a node, detached, serving on `listener` if we hold its socket (else it binds its port); sets its
    pid once /proc shows its argv."""
    node.data_dir.mkdir(parents=True, exist_ok=True)
    proc = launch_process(node.argv, manifest.log_path(node), ready_file=manifest.ready_path(node),
                          listeners=[] if listener is None else [listener], detached=True)
    node.pid = proc.pid
    try:
        wait_until_exec_done(proc, node.argv)
    except TimeoutError as e:
        raise ClusterError(f"{node.name}: {e}") from None


def _settle(nodes: Sequence[Node], act: Callable[[list[RecordedProcess]], list[StopOutcome]]) -> dict[str, StopOutcome]:
    """Signal the nodes through `act`, then forget their pids: exited, or never running as the node."""
    try:
        outcomes = act([_process(n) for n in nodes])
    except StillRunning as e:
        names = ", ".join(f"{nodes[i].name} (pid {nodes[i].pid})" for i in e.indexes)
        raise ClusterError(f"still running {KILL_TIMEOUT_S}s after SIGKILL: {names}") from None
    for node in nodes:
        node.pid = None
    return {n.name: outcome for n, outcome in zip(nodes, outcomes, strict=True)}


def stop_nodes(nodes: Sequence[Node], timeout: float = STOP_TIMEOUT_S) -> dict[str, StopOutcome]:
    """SIGTERM all at once, wait for all, SIGKILL those still running at the timeout. Sets pids to None."""
    return _settle(nodes, lambda processes: stop_processes(processes, timeout))


def kill_nodes(nodes: Sequence[Node]) -> dict[str, StopOutcome]:
    """SIGKILL, as a crash would; waits until the processes are gone. Sets their pids to None."""
    return _settle(nodes, kill_processes)


# waiting for readiness


def wait_until_serving(manifest: ClusterManifest, nodes: Sequence[Node], deadline: float) -> None:
    """Wait until each node serves (its ready file is there); fail fast, with its log tail, when one exits."""
    try:
        wait_until_ready([_process(n) for n in nodes], [manifest.ready_path(n) for n in nodes], deadline)
    except ExitedBeforeReady as e:
        raise _exited(manifest, nodes[e.index], "before serving") from None
    except NotReadyInTime as e:
        raise _not_ready(manifest, [nodes[i] for i in e.pending], "serve") from None


async def wait_until_registered(manifest: ClusterManifest, deadline: float) -> None:
    """Poll until every broker's metadata lists all brokers: each has registered and learnt of the others."""
    expected = {b.id for b in manifest.brokers}
    pending = list(manifest.brokers)
    while True:
        listed = await asyncio.gather(*(metadata_brokers(f"{HOST}:{b.port}") for b in pending))
        pending = [b for b, brokers in zip(pending, listed, strict=True) if set(brokers or ()) != expected]
        if not pending:
            return
        _fail_on_exit(manifest, pending, "before the cluster formed")
        if time.monotonic() > deadline:
            raise _not_ready(manifest, pending, f"list brokers {sorted(expected)} in their metadata")
        await asyncio.sleep(POLL_INTERVAL_S)


async def metadata_brokers(bootstrap: str) -> dict[int, BrokerInfo] | None:
    """The brokers a Metadata request lists, or None when no broker answers in time."""
    try:
        async with Admin(bootstrap, request_timeout_ms=int(METADATA_TIMEOUT_S * 1000)) as admin:
            snapshot = await asyncio.wait_for(admin.cluster.refresh(), METADATA_TIMEOUT_S)
    except (KafkaError, OSError, TimeoutError):
        return None
    return snapshot.brokers


def _fail_on_exit(manifest: ClusterManifest, nodes: Iterable[Node], when: str) -> None:
    for node in nodes:
        if _process(node).has_exited():
            raise _exited(manifest, node, when)


def _exited(manifest: ClusterManifest, node: Node, when: str) -> ClusterError:
    log = manifest.log_path(node)
    return ClusterError(f"{node.name} exited {when}; last lines of {log}:\n{output_tail(log)}")


def _not_ready(manifest: ClusterManifest, nodes: Sequence[Node], what: str) -> ClusterError:
    tails = "\n".join(
        f"--- last lines of {manifest.log_path(n)}:\n{output_tail(manifest.log_path(n))}" for n in nodes
    )
    return ClusterError(f"timed out waiting for {', '.join(n.name for n in nodes)} to {what}\n{tails}")


# commands


def cluster_up(
    root: str | Path,
    brokers: int,
    *,
    base_port: int | None = None,
    broker_overrides: Mapping[str, str] | None = None,
    controller_overrides: Mapping[str, str] | None = None,
    timeout: float = READY_TIMEOUT_S,
) -> ClusterManifest:
    """Start a controller and `brokers` brokers; returns once they form a cluster, or stops them and raises."""
    root = Path(root).resolve()
    if (root / CLUSTER_FILE).exists():
        if live := [n for n in load_manifest(root).nodes if is_running_as(n.pid, n.argv)]:
            names = ", ".join(f"{n.name} (pid {n.pid})" for n in live)
            raise ClusterError(f"{root} holds a running cluster ({names}): `replog cluster down` it first")
    nodes = brokers + 1
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
            metrics_ports=metrics_ports,
            broker_overrides=broker_overrides,
            controller_overrides=controller_overrides,
        )
        root.mkdir(parents=True, exist_ok=True)
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
        asyncio.run(wait_until_registered(manifest, deadline))
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

    @property
    def all_up(self) -> bool:
        return all(s.alive and s.serving for s in self.nodes)


def cluster_status(root: str | Path) -> ClusterStatus:
    manifest = load_manifest(root)
    statuses = [
        NodeStatus(n, is_running_as(n.pid, n.argv), answers_api_versions(HOST, n.port))
        for n in manifest.nodes
    ]
    serving = ",".join(f"{HOST}:{s.node.port}" for s in statuses if s.serving and s.node.role is Role.BROKER)
    return ClusterStatus(statuses, asyncio.run(metadata_brokers(serving)) if serving else None)


def cluster_down(root: str | Path, timeout: float = STOP_TIMEOUT_S) -> dict[str, StopOutcome]:
    """Stop the brokers (in parallel, each moving its leaderships away), then the controller; idempotent."""
    manifest = load_manifest(root)
    try:
        outcomes = stop_nodes(manifest.brokers, timeout)
        outcomes |= stop_nodes([manifest.controller], timeout)
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
    return _table(rows) + f"\nmetrics dumps: {manifest.root / METRICS_DIR}"


def format_status(status: ClusterStatus) -> str:
    rows = [("NODE", "ROLE", "PID", "PORT", "ALIVE", "SERVING")]
    rows += [
        (
            str(s.node.id),
            str(s.node.role),
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
    return f"{_table(rows)}\nbrokers in the cluster metadata: {listed or 'none'}"


def format_outcomes(outcomes: Mapping[str, StopOutcome]) -> str:
    return "\n".join(f"{name}: {outcome}" for name, outcome in outcomes.items())


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )
