"""DIR/cluster.json: the nodes of a `replog cluster` (id, role, port, data dir, argv, pid), enough to find,
stop and restart every node by hand; replaced atomically on every change."""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from ..harness.processes import HOST
from ..log.checkpoint import write_atomically

CLUSTER_FILE = "cluster.json"
FIRST_CONTROLLER_ID = 3000  # controllers are 3000, 3001, ... (issue 19); brokers are 1..N


class ClusterError(Exception):
    """A cluster command failed; the message says why, with the relevant node's log tail when there is one."""


class Role(StrEnum):
    CONTROLLER = "controller"
    BROKER = "broker"


def node_name(role: Role, node_id: int) -> str:
    """Names a node's files and, for a controller, its data directory under the cluster's root."""
    if role is Role.CONTROLLER:
        # The first controller keeps the one-controller cluster's names; more are told apart by id.
        return "controller" if node_id == FIRST_CONTROLLER_ID else f"controller-{node_id}"
    return f"broker-{node_id}"


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
        return node_name(self.role, self.id)

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
    controllers: list[Node]  # the metadata quorum's voters
    brokers: list[Node]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{HOST}:{b.port}" for b in self.brokers)

    @property
    def controller(self) -> Node:
        """The first controller: the only one of a single-controller cluster."""
        return self.controllers[0]

    @property
    def nodes(self) -> list[Node]:
        return [*self.controllers, *self.brokers]

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
        # One controller is written as today's "controller"; a quorum as issue 19's "controllers" list.
        controllers = ({"controller": self.controllers[0].to_json()} if len(self.controllers) == 1
                       else {"controllers": [c.to_json() for c in self.controllers]})
        return {"bootstrap": self.bootstrap, **controllers, "brokers": [b.to_json() for b in self.brokers]}

    @classmethod
    def from_json(cls, root: Path, data: Mapping) -> "ClusterManifest":
        listed = data["controllers"] if "controllers" in data else [data["controller"]]
        controllers = [Node.from_json(Role.CONTROLLER, c) for c in listed]
        if not controllers:
            raise ValueError("no controller listed")
        return cls(root, controllers, [Node.from_json(Role.BROKER, b) for b in data["brokers"]])


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
