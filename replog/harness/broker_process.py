"""One `python -m replog broker start` child process on 127.0.0.1, started and stopped by its parent: the
broker the integration tests, benchmarks and LocalCluster run."""

from pathlib import Path

from .node_process import NodeProcess
from .processes import HOST


class BrokerProcess(NodeProcess):
    role = "broker"

    def __init__(
        self, log_dir: Path, *, node_id: int = 1, output: Path | None = None,
        overrides: dict[str, str] | None = None, env: dict[str, str] | None = None,
    ):
        log_dir = Path(log_dir)
        super().__init__(log_dir, name=f"broker {node_id}", output=output or log_dir.parent / f"broker-{node_id}.out",
                         overrides=overrides, env=env)
        self.node_id = node_id

    @property
    def log_dir(self) -> Path:
        return self.data_dir

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def metrics_port(self) -> int | None:
        assert self.ready is not None, "not started"
        return self.ready.metrics_port

    def node_overrides(self) -> dict[str, str]:
        return {"listeners": f"PLAINTEXT://{HOST}:{self.port}", "log.dirs": str(self.log_dir),
                "node.id": str(self.node_id)}
