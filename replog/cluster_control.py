"""`replog cluster ...`: a controller and N brokers as detached local processes, described by DIR/cluster.json.

`up` writes each node's properties file (mode 0600: it holds the inter-broker secret), starts every node in a
session of its own so it outlives the command, records the nodes in cluster.json and waits until each answers
ApiVersions and each broker's metadata lists all the brokers. The other commands act on the pids recorded
there. A pid counts as the node only while /proc/<pid>/cmdline equals the recorded argv, so a pid the kernel
has handed to another process is never signalled (Linux only). cluster.json is replaced atomically.
"""

import asyncio
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from .client import Admin, BrokerInfo, KafkaError
from .protocol.apis import ApiKey
from .protocol.frames import size_prefix
from .protocol.headers import encode_request_header
from .server.properties import read_properties

HOST = "127.0.0.1"
CLUSTER_FILE = "cluster.json"
CONTROLLER_ID = 3000  # the controller's node.id default; brokers are 1..N
MAX_BROKERS = 32  # each broker is a Python process on this machine
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0  # SIGTERM starts a controlled shutdown, which moves leaderships away first
KILL_TIMEOUT_S = 10.0  # SIGKILL cannot be caught, but a process in uninterruptible I/O exits late
POLL_INTERVAL_S = 0.05
EXEC_TIMEOUT_S = 5.0
EXEC_POLL_INTERVAL_S = 0.001  # exec completes within microseconds to milliseconds
METADATA_TIMEOUT_S = 2.0  # one Metadata round trip while polling
PORT_PICK_ATTEMPTS = 100
LOG_TAIL_LINES = 30
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
METRICS_DIR = "metrics"  # DIR/metrics/<node name>: what `replog analyze --metrics DIR/metrics` reads


class ClusterError(Exception):
    """A cluster command failed; the message says why, with the relevant node's log tail when there is one."""


class Role(StrEnum):
    CONTROLLER = "controller"
    BROKER = "broker"


class StopOutcome(StrEnum):
    NOT_RUNNING = "was not running"
    STOPPED = "stopped (SIGTERM)"
    KILLED = "killed (SIGKILL)"
    KILLED_AFTER_TIMEOUT = "killed (SIGKILL) after SIGTERM timed out"


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


# probes


def free_port() -> int:
    """A port the OS reports free on 127.0.0.1 now; another process may still take it before we do."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers_api_versions(host: str, port: int, timeout: float = 1.0) -> bool:
    """One blocking ApiVersions v0 round trip: the node (broker or controller) serves requests, not just
    listens."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            body = exchange_api_versions(s, 1, "replog-probe")
    except (OSError, ConnectionError):
        return False
    correlation_id = int.from_bytes(body[:4], "big")
    error_code = int.from_bytes(body[4:6], "big", signed=True)
    return correlation_id == 1 and error_code == 0


def exchange_api_versions(s: socket.socket, correlation_id: int, client_id: str) -> bytes:
    """Send an ApiVersions v0 request on a connected socket and return the response frame after its size."""
    header = encode_request_header(ApiKey.API_VERSIONS, 0, correlation_id, client_id)
    s.sendall(size_prefix(len(header)) + header)
    size = int.from_bytes(_recv_exactly(s, 4), "big")
    if not 0 < size < 1 << 20:
        raise ConnectionError(f"implausible ApiVersions response size {size}")
    return _recv_exactly(s, size)


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = s.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        chunks += chunk
    return bytes(chunks)


# planning: ports, properties, argv


def allocate_ports(
    count: int, base_port: int | None = None, pick: Callable[[], int] = free_port
) -> list[int]:
    """`count` distinct ports: base_port, base_port+1, ... or, without one, ports the OS reports free."""
    assert count > 0
    if base_port is not None:
        if not 0 < base_port <= 65536 - count:
            raise ValueError(f"--base-port {base_port} leaves no room for {count} ports below 65536")
        return list(range(base_port, base_port + count))
    ports: list[int] = []
    for _ in range(PORT_PICK_ATTEMPTS):
        port = pick()
        if port not in ports:  # the OS may hand out a port it just reported again
            ports.append(port)
        if len(ports) == count:
            return ports
    raise ClusterError(f"could not find {count} distinct free ports in {PORT_PICK_ATTEMPTS} attempts")


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


def metrics_properties(root: Path, name: str, port: int) -> dict[str, str]:
    """Each node serves /metrics on its own port and dumps under root/metrics/<name>."""
    return {"metrics.port": str(port), "metrics.dump.dir": str(root / METRICS_DIR / name)}


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
    *,
    base_port: int | None = None,
    broker_overrides: Mapping[str, str] | None = None,
    controller_overrides: Mapping[str, str] | None = None,
    secret: str | None = None,
    python: str = sys.executable,
) -> tuple[ClusterManifest, dict[str, dict[str, str]]]:
    """The nodes of a new cluster (pids not yet known) and each node's properties, by node name."""
    if not 1 <= brokers <= MAX_BROKERS:
        raise ValueError(f"--brokers must be between 1 and {MAX_BROKERS}, got {brokers}")
    broker_overrides = dict(broker_overrides or {})
    controller_overrides = dict(controller_overrides or {})
    if managed := sorted(MANAGED_KEYS & (broker_overrides.keys() | controller_overrides.keys())):
        raise ValueError(f"`replog cluster up` sets {', '.join(managed)} itself; do not override them")
    root = Path(root).resolve()
    secret = secret or secrets.token_hex(16)
    # Node ports first (base, base+1, ...), then one metrics port per node after them.
    ports = allocate_ports(2 * (brokers + 1), base_port)
    metrics_ports = dict(zip(["controller", *(f"broker-{i}" for i in range(1, brokers + 1))],
                             ports[brokers + 1 :], strict=True))
    controller = Node(CONTROLLER_ID, Role.CONTROLLER, ports[0], root / "controller", [])
    nodes = [Node(i, Role.BROKER, ports[i], root / f"broker-{i}", []) for i in range(1, brokers + 1)]
    manifest = ClusterManifest(root, controller, nodes)
    properties = {
        controller.name: controller_properties(
            controller.id, controller.port, controller.data_dir, secret,
            metrics_properties(root, controller.name, metrics_ports[controller.name]), controller_overrides,
        )
    }
    for b in manifest.brokers:
        properties[b.name] = broker_properties(
            b.id, b.port, b.data_dir, controller.port, secret,
            metrics_properties(root, b.name, metrics_ports[b.name]), broker_overrides,
        )
    for node in manifest.nodes:
        node.argv = node_argv(node.role, manifest.config_path(node), python)
    return manifest, properties


# files


def write_atomically(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Readers see the old file or the new one, never a torn one; the file never exists with a wider mode."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "wb") as f:
        os.fchmod(f.fileno(), mode)  # a leftover tmp file keeps its old mode through O_CREAT
        f.write(data)
    os.replace(tmp, path)


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


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) or "(empty)"
    except OSError:
        return "(no log)"


# processes


def process_cmdline(pid: int) -> list[str] | None:
    """The argv of a live process, [] for a zombie, None when there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [os.fsdecode(part) for part in raw.split(b"\0")[:-1]]


def is_running_as(pid: int | None, argv: Sequence[str]) -> bool:
    """The process exists and runs exactly argv: a reused pid or a zombie (empty cmdline) does not count."""
    return pid is not None and pid > 0 and process_cmdline(pid) == list(argv)


def has_exited(node: Node) -> bool:
    """True once the node's process is gone, a zombie, or its pid runs something else. Reaps the process when
    it is our own child (`up` and `start-node` start them), so it does not linger as a zombie."""
    if node.pid is None:
        return True
    try:
        os.waitpid(node.pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not our child
    return not is_running_as(node.pid, node.argv)


def launch(node: Node, log_path: Path) -> None:
    """Start a node in a session of its own (it outlives us and our terminal's signals); sets its pid.

    Returns once /proc shows the node's argv: Popen returns as soon as exec has begun, and until the kernel
    has set up the new argv the pid would not count as the node."""
    node.data_dir.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            node.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    node.pid = proc.pid
    deadline = time.monotonic() + EXEC_TIMEOUT_S
    while not is_running_as(proc.pid, node.argv) and proc.poll() is None:
        if time.monotonic() > deadline:
            raise ClusterError(
                f"{node.name} (pid {proc.pid}) does not show its argv {EXEC_TIMEOUT_S}s after exec"
            )
        time.sleep(EXEC_POLL_INTERVAL_S)


def _wait_for_exits(nodes: Iterable[Node], timeout: float) -> list[Node]:
    """Poll until every node's process has exited or the timeout passes; returns those still running."""
    deadline = time.monotonic() + timeout
    running = [n for n in nodes if not has_exited(n)]
    while running and time.monotonic() < deadline:
        time.sleep(POLL_INTERVAL_S)
        running = [n for n in running if not has_exited(n)]
    return running


def _signal(nodes: Iterable[Node], signum: int) -> list[Node]:
    """Signal the nodes still running as themselves; forget the pids of the others. Returns those signalled."""
    signalled = []
    for node in nodes:
        if is_running_as(node.pid, node.argv):
            try:
                os.kill(node.pid, signum)
                signalled.append(node)
                continue
            except ProcessLookupError:
                pass  # exited between the check and the signal
        node.pid = None
    return signalled


def stop_nodes(nodes: Sequence[Node], timeout: float = STOP_TIMEOUT_S) -> dict[str, StopOutcome]:
    """SIGTERM all at once, wait for all, SIGKILL those still running at the timeout. Sets exited pids to None."""
    signalled = _signal(nodes, signal.SIGTERM)
    late = _wait_for_exits(signalled, timeout)
    killed = _signal(late, signal.SIGKILL)
    _forget_exited(signalled, _wait_for_exits(killed, KILL_TIMEOUT_S))

    def outcome(node: Node) -> StopOutcome:
        if node not in signalled:
            return StopOutcome.NOT_RUNNING
        return StopOutcome.KILLED_AFTER_TIMEOUT if node in killed else StopOutcome.STOPPED

    return {n.name: outcome(n) for n in nodes}


def kill_nodes(nodes: Sequence[Node]) -> dict[str, StopOutcome]:
    """SIGKILL, as a crash would; waits until the processes are gone. Sets their pids to None."""
    signalled = _signal(nodes, signal.SIGKILL)
    _forget_exited(signalled, _wait_for_exits(signalled, KILL_TIMEOUT_S))
    return {n.name: StopOutcome.KILLED if n in signalled else StopOutcome.NOT_RUNNING for n in nodes}


def _forget_exited(signalled: Iterable[Node], still_running: list[Node]) -> None:
    if still_running:
        names = ", ".join(f"{n.name} (pid {n.pid})" for n in still_running)
        raise ClusterError(f"still running {KILL_TIMEOUT_S}s after SIGKILL: {names}")
    for node in signalled:
        node.pid = None


# waiting for readiness


def wait_until_serving(manifest: ClusterManifest, nodes: Iterable[Node], deadline: float) -> None:
    """Poll until each node answers ApiVersions; fail fast, with its log tail, when one exits."""
    pending = list(nodes)
    while True:
        pending = [n for n in pending if not answers_api_versions(HOST, n.port)]
        if not pending:
            return
        _fail_on_exit(manifest, pending, "before serving")
        if time.monotonic() > deadline:
            raise _not_ready(manifest, pending, "answer ApiVersions")
        time.sleep(POLL_INTERVAL_S)


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
        if has_exited(node):
            log = manifest.log_path(node)
            raise ClusterError(f"{node.name} exited {when}; last lines of {log}:\n{log_tail(log)}")


def _not_ready(manifest: ClusterManifest, nodes: Sequence[Node], what: str) -> ClusterError:
    tails = "\n".join(
        f"--- last lines of {manifest.log_path(n)}:\n{log_tail(manifest.log_path(n))}" for n in nodes
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
    manifest, properties = plan_cluster(
        root,
        brokers,
        base_port=base_port,
        broker_overrides=broker_overrides,
        controller_overrides=controller_overrides,
    )
    if base_port is not None:
        # A stranger already listening on a port would answer ApiVersions in place of the node.
        _check_ports_free([n.port for n in manifest.nodes]
                          + [int(properties[n.name]["metrics.port"]) for n in manifest.nodes])
    root.mkdir(parents=True, exist_ok=True)
    for node in manifest.nodes:
        write_atomically(manifest.config_path(node), format_properties(properties[node.name]).encode(), 0o600)
    deadline = time.monotonic() + timeout
    try:
        for node in manifest.nodes:
            launch(node, manifest.log_path(node))
        save_manifest(manifest)
        wait_until_serving(manifest, manifest.nodes, deadline)
        asyncio.run(wait_until_registered(manifest, deadline))
    except BaseException:
        kill_nodes(manifest.nodes)  # the cluster never formed: nothing worth a graceful shutdown
        save_manifest(manifest)
        raise
    return manifest


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
    launch(node, manifest.log_path(node))
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
    """The node's Prometheus endpoint, from the properties file `up` wrote for it."""
    port = read_properties(manifest.config_path(node), []).get("metrics.port", "-1")
    return f"http://{HOST}:{port}/metrics" if int(port) > 0 else "-"


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
