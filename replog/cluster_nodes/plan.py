"""The plan of a new `replog cluster`: each node's ports, properties file and command line."""

import secrets
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..harness.metrics_layout import metrics_properties
from ..harness.processes import HOST
from .manifest import FIRST_CONTROLLER_ID, ClusterManifest, Node, Role, node_name

CONTROLLER_ID = FIRST_CONTROLLER_ID  # the controller's node.id default; brokers are 1..N
MAX_BROKERS = 32  # each broker is a Python process on this machine
# A quorum of 2f+1 voters survives f failures; 3 survives one, as KRaft's smallest production quorum.
DEFAULT_CONTROLLERS = 3
MAX_CONTROLLERS = 9  # Raft's cost grows with the voters; Kafka advises 3 or 5
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
        "controller.quorum.voters",
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
    node_id: int, port: int, data_dir: Path, secret: str, metrics: Mapping[str, str], overrides: Mapping[str, str],
    voters: str | None = None,
) -> dict[str, str]:
    """voters: controller.quorum.voters (id@host:port,...) of a quorum of several; a single controller runs a
    quorum of one on its own listener without it."""
    return {
        "node.id": str(node_id),
        "listeners": f"PLAINTEXT://{HOST}:{port}",
        "metadata.log.dir": str(data_dir),
        **({"controller.quorum.voters": voters} if voters is not None else {}),
        "inter.broker.secret": secret,
        **metrics,
        **overrides,
    }


def broker_properties(
    node_id: int,
    port: int,
    data_dir: Path,
    controller_bootstrap: str,
    secret: str,
    metrics: Mapping[str, str],
    overrides: Mapping[str, str],
) -> dict[str, str]:
    return {
        "node.id": str(node_id),
        "listeners": f"PLAINTEXT://{HOST}:{port}",
        "log.dirs": str(data_dir),
        "controller.quorum.bootstrap.servers": controller_bootstrap,
        "inter.broker.secret": secret,
        **metrics,
        **overrides,
    }


def added_broker_properties(template: Mapping[str, str], root: Path, node: Node) -> dict[str, str]:
    """`cluster add-broker`: an existing broker's properties (its overrides, the controllers, how it logs in to
    them) with the new broker's identity, port (on a listener of the same name) and directories."""
    listener_name = template.get("listeners", "PLAINTEXT://").partition("://")[0] or "PLAINTEXT"
    return {
        **template,
        "node.id": str(node.id),
        "listeners": f"{listener_name}://{HOST}:{node.port}",
        "log.dirs": str(node.data_dir),
        **metrics_properties(root, node.name, 0),
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
    controllers: int = 1,
    metrics_ports: Sequence[int] | None = None,
    broker_overrides: Mapping[str, str] | None = None,
    controller_overrides: Mapping[str, str] | None = None,
    secret: str | None = None,
    python: str = sys.executable,
) -> tuple[ClusterManifest, dict[str, dict[str, str]]]:
    """The nodes of a new cluster (pids not yet known) and each node's properties, by node name. node_ports
    and metrics_ports are the controllers' (3000, 3001, ...), then broker 1's, ...; metrics ports default to 0
    (any, reported in the node's ready file). Several controllers are the voters of the metadata quorum
    (controller.quorum.voters); every broker bootstraps from all of them and follows the active one."""
    if not 1 <= brokers <= MAX_BROKERS:
        raise ValueError(f"--brokers must be between 1 and {MAX_BROKERS}, got {brokers}")
    if not 1 <= controllers <= MAX_CONTROLLERS:
        raise ValueError(f"--controllers must be between 1 and {MAX_CONTROLLERS}, got {controllers}")
    nodes = controllers + brokers
    metrics_ports = [0] * nodes if metrics_ports is None else list(metrics_ports)
    assert len(node_ports) == len(metrics_ports) == nodes, (node_ports, metrics_ports)
    broker_overrides = dict(broker_overrides or {})
    controller_overrides = dict(controller_overrides or {})
    if managed := sorted(MANAGED_KEYS & (broker_overrides.keys() | controller_overrides.keys())):
        raise ValueError(f"`replog cluster up` sets {', '.join(managed)} itself; do not override them")
    root = Path(root).resolve()
    secret = secret or secrets.token_hex(16)
    # Each controller has a metadata log of its own: DIR/controller, DIR/controller-3001, ...
    quorum = [Node(CONTROLLER_ID + i, Role.CONTROLLER, node_ports[i],
                   root / node_name(Role.CONTROLLER, CONTROLLER_ID + i), []) for i in range(controllers)]
    members = [Node(i, Role.BROKER, node_ports[controllers + i - 1], root / f"broker-{i}", [])
               for i in range(1, brokers + 1)]
    manifest = ClusterManifest(root, quorum, members)
    voters = ",".join(f"{c.id}@{HOST}:{c.port}" for c in quorum) if controllers > 1 else None
    controller_bootstrap = ",".join(f"{HOST}:{c.port}" for c in quorum)
    properties = {
        c.name: controller_properties(
            c.id, c.port, c.data_dir, secret, metrics_properties(root, c.name, metrics_ports[i]),
            controller_overrides, voters,
        )
        for i, c in enumerate(quorum)
    }
    for i, b in enumerate(manifest.brokers, start=controllers):
        properties[b.name] = broker_properties(
            b.id, b.port, b.data_dir, controller_bootstrap, secret,
            metrics_properties(root, b.name, metrics_ports[i]), broker_overrides,
        )
    for node in manifest.nodes:
        node.argv = node_argv(node.role, manifest.config_path(node), python)
    return manifest, properties
