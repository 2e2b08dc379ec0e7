"""The plan of a new `replog cluster`: each node's ports, properties file and command line."""

import secrets
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..harness.metrics_layout import metrics_properties
from ..harness.processes import HOST
from .manifest import ClusterManifest, Node, Role

CONTROLLER_ID = 3000  # the controller's node.id default; brokers are 1..N
MAX_BROKERS = 32  # each broker is a Python process on this machine
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
