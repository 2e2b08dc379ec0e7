"""One `python -m replog controller start` child process on 127.0.0.1: a voter of the controller quorum, started,
killed, paused and resumed by its parent, as BrokerProcess does for a broker. LocalCluster runs its controllers
as these with `controller_processes=True`."""

from pathlib import Path

from .node_process import NodeProcess
from .processes import HOST


class ControllerProcess(NodeProcess):
    role = "controller"

    def __init__(self, metadata_log_dir: Path, *, controller_id: int, output: Path,
                 overrides: dict[str, str] | None = None) -> None:
        super().__init__(metadata_log_dir, name=f"controller {controller_id}", output=output, overrides=overrides)
        self.controller_id = controller_id

    @property
    def metadata_log_dir(self) -> Path:
        return self.data_dir

    @property
    def metrics_port(self) -> int | None:
        return None if self.ready is None else self.ready.metrics_port

    def node_overrides(self) -> dict[str, str]:
        return {"node.id": str(self.controller_id), "listeners": f"CONTROLLER://{HOST}:{self.port}",
                "metadata.log.dir": str(self.metadata_log_dir)}
