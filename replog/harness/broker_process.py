"""One `python -m replog broker start` child process on 127.0.0.1, started and stopped by its parent: the
broker the integration tests, benchmarks and LocalCluster run."""

import signal
import subprocess
import sys
import time
from pathlib import Path

from replog.cluster_control import free_port
from replog.harness.probes import answers_api_versions

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


class BrokerProcess:
    """A `python -m replog broker start` child process on 127.0.0.1 (shared with the integration tests)."""

    def __init__(
        self, log_dir: Path, *, port: int | None = None, node_id: int = 1, output: Path | None = None,
        overrides: dict[str, str] | None = None, env: dict[str, str] | None = None,
    ):
        self.log_dir = Path(log_dir)
        self.port = port or free_port()
        self.node_id = node_id
        self.overrides = dict(overrides or {})
        self.output = output or self.log_dir.parent / f"broker-{node_id}.out"
        self.env = env  # None: this process's environment
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = READY_TIMEOUT_S) -> None:
        self.launch()
        self.wait_ready(timeout)

    def launch(self) -> None:
        """Start the process without waiting for it to serve."""
        assert self.proc is None or self.proc.poll() is not None, "broker already running"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable, "-m", "replog", "broker", "start",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override", f"log.dirs={self.log_dir}",
            "--override", f"node.id={self.node_id}",
        ]  # fmt: skip
        for key, value in self.overrides.items():
            command += ["--override", f"{key}={value}"]
        with open(self.output, "ab") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=self.env)

    def wait_ready(self, timeout: float, poll_interval_s: float = 0.05) -> None:
        deadline = time.monotonic() + timeout
        while not answers_api_versions("127.0.0.1", self.port):
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.output_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"broker not ready after {timeout}s:\n{self.output_tail()}")
            time.sleep(poll_interval_s)

    def output_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.output.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no output)"

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM, then SIGKILL if it does not exit in time; returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return self.kill()

    def kill(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.kill()
        return self.proc.wait(STOP_TIMEOUT_S)

    def restart(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Stop (gracefully) and start again on the same port and log directory."""
        self.stop()
        self.start(timeout)
