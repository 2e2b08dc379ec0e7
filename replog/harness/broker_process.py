"""One `python -m replog broker start` child process on 127.0.0.1, started and stopped by its parent: the
broker the integration tests, benchmarks and LocalCluster run."""

import signal
import subprocess
import sys
import time
from pathlib import Path

from .processes import (
    HOST,
    READY_POLL_INTERVAL_S,
    ExitedBeforeReady,
    NotReadyInTime,
    Ready,
    SpawnedProcess,
    kill_processes,
    launch,
    listening_socket,
    output_tail,
    stop_processes,
    wait_until_ready,
)

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


class BrokerProcess:
    """A broker child process. Its listening socket is bound here, when the object is made, so `port` is
    known before the broker starts; the first start hands the socket down, later ones bind the same port."""

    def __init__(
        self, log_dir: Path, *, node_id: int = 1, output: Path | None = None,
        overrides: dict[str, str] | None = None, env: dict[str, str] | None = None,
    ):
        self.log_dir = Path(log_dir)
        self.node_id = node_id
        self.overrides = dict(overrides or {})
        self.output = output or self.log_dir.parent / f"broker-{node_id}.out"
        self.ready_file = self.output.with_name(f"{self.output.name}.ready")
        self.env = env  # None: this process's environment
        self.proc: subprocess.Popen | None = None
        self._listener = listening_socket()  # handed down by the first launch, then closed
        self.port = self._listener.getsockname()[1]
        self.ready: Ready | None = None  # the running broker's report: its pid and ports
        self.paused = False  # SIGSTOPped by pause() and not resumed yet

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def running(self) -> bool:
        """The process exists (a paused one too)."""
        return self.proc is not None and self.proc.poll() is None

    @property
    def metrics_port(self) -> int | None:
        assert self.ready is not None, "not started"
        return self.ready.metrics_port

    def start(self, timeout: float = READY_TIMEOUT_S) -> None:
        self.launch()
        self.wait_ready(timeout)

    def launch(self) -> None:
        """Start the process without waiting for it to serve."""
        assert not self.running, "broker already running"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.ready = None
        self.paused = False
        command = [
            sys.executable, "-m", "replog", "broker", "start",
            "--override", f"listeners=PLAINTEXT://{HOST}:{self.port}",
            "--override", f"log.dirs={self.log_dir}",
            "--override", f"node.id={self.node_id}",
        ]  # fmt: skip
        for key, value in self.overrides.items():
            command += ["--override", f"{key}={value}"]
        listeners = [] if self._listener is None else [self._listener]
        self.proc = launch(command, self.output, ready_file=self.ready_file, listeners=listeners,
                           env=self.env)
        self._close_listener()  # the broker has its own copy now

    def wait_ready(self, timeout: float, poll_interval_s: float = READY_POLL_INTERVAL_S) -> None:
        """Wait until the broker serves (its ready file is there); kills it at the timeout."""
        try:
            (self.ready,) = wait_until_ready([SpawnedProcess(self.proc)], [self.ready_file],
                                             time.monotonic() + timeout, poll_interval_s)
        except ExitedBeforeReady:
            raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.output_tail()}") from None
        except NotReadyInTime:
            self.kill()
            raise TimeoutError(f"broker not ready after {timeout}s:\n{self.output_tail()}") from None
        assert self.ready.port == self.port, (self.ready, self.port)

    def output_tail(self, lines: int = 30) -> str:
        return output_tail(self.output, lines)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM, then SIGKILL if it does not exit in time; returns the exit code."""
        self._close_listener()
        if self.proc is None:
            return None
        stop_processes([SpawnedProcess(self.proc)], timeout)
        return self.proc.returncode

    def kill(self) -> int | None:
        self._close_listener()
        if self.proc is None:
            return None
        kill_processes([SpawnedProcess(self.proc)])
        return self.proc.returncode

    def pause(self) -> None:
        """SIGSTOP: the broker stays, silent, as on a stalled machine, until resume()."""
        assert self.running, "broker not running"
        SpawnedProcess(self.proc).signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT, if the process exists: harmless to one that was not paused."""
        if self.proc is not None:
            SpawnedProcess(self.proc).signal(signal.SIGCONT)
        self.paused = False

    def restart(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Stop (gracefully) and start again on the same port and log directory."""
        self.stop()
        self.start(timeout)

    def _close_listener(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
