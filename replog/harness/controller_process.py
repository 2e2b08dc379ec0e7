"""One `python -m replog controller start` child process on 127.0.0.1: a voter of the controller quorum, started,
killed, paused and resumed by its parent, as BrokerProcess does for a broker. LocalCluster runs its controllers
as these with `controller_processes=True`."""

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


class ControllerProcess:
    """A controller child process. Its listening socket is bound when the object is made, so `port` is known
    before any voter starts (every voter must know every other's address); the first start hands the socket
    down, later ones bind the same port."""

    def __init__(self, metadata_log_dir: Path, *, controller_id: int, output: Path,
                 overrides: dict[str, str] | None = None) -> None:
        self.metadata_log_dir = Path(metadata_log_dir)
        self.controller_id = controller_id
        self.overrides = dict(overrides or {})
        self.output = output
        self.ready_file = output.with_name(f"{output.name}.ready")
        self.proc: subprocess.Popen | None = None
        self.paused = False
        self._listener = listening_socket()  # handed down by the first launch, then closed
        self.port = self._listener.getsockname()[1]
        self.ready: Ready | None = None  # the running controller's report: its pid and ports

    @property
    def running(self) -> bool:
        """The process exists (a paused one too)."""
        return self.proc is not None and self.proc.poll() is None

    @property
    def metrics_port(self) -> int | None:
        return None if self.ready is None else self.ready.metrics_port

    def start(self, timeout: float = READY_TIMEOUT_S) -> None:
        self.launch()
        self.wait_ready(timeout)

    def launch(self) -> None:
        """Start the process without waiting for it to serve."""
        assert not self.running, f"controller {self.controller_id} already running"
        self.metadata_log_dir.mkdir(parents=True, exist_ok=True)
        self.ready = None
        self.paused = False
        command = [
            sys.executable, "-m", "replog", "controller", "start",
            "--override", f"node.id={self.controller_id}",
            "--override", f"listeners=CONTROLLER://{HOST}:{self.port}",
            "--override", f"metadata.log.dir={self.metadata_log_dir}",
        ]  # fmt: skip
        for key, value in self.overrides.items():
            command += ["--override", f"{key}={value}"]
        listeners = [] if self._listener is None else [self._listener]
        self.proc = launch(command, self.output, ready_file=self.ready_file, listeners=listeners)
        self._close_listener()  # the controller has its own copy now

    def wait_ready(self, timeout: float, poll_interval_s: float = READY_POLL_INTERVAL_S) -> None:
        """Wait until the controller serves (its ready file is there); kills it at the timeout."""
        try:
            (self.ready,) = wait_until_ready([SpawnedProcess(self.proc)], [self.ready_file],
                                             time.monotonic() + timeout, poll_interval_s)
        except ExitedBeforeReady:
            raise RuntimeError(f"controller {self.controller_id} exited with {self.proc.returncode}:\n"
                               f"{self.output_tail()}") from None
        except NotReadyInTime:
            self.kill()
            raise TimeoutError(f"controller {self.controller_id} not ready after {timeout}s:\n"
                               f"{self.output_tail()}") from None

    def output_tail(self, lines: int = 30) -> str:
        return output_tail(self.output, lines)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM (after SIGCONT: a stopped process would not see it), then SIGKILL if it does not exit in
        time; returns the exit code."""
        self._close_listener()
        if self.proc is None:
            return None
        self.resume()
        stop_processes([SpawnedProcess(self.proc)], timeout)
        return self.proc.returncode

    def kill(self) -> int | None:
        """SIGKILL, as a crash: the metadata log keeps only what was flushed."""
        self._close_listener()
        if self.proc is None:
            return None
        kill_processes([SpawnedProcess(self.proc)])
        self.paused = False
        return self.proc.returncode

    def pause(self) -> None:
        """SIGSTOP: the controller stays, silent, as in a long GC pause or a frozen VM, until resume()."""
        assert self.running, f"controller {self.controller_id} not running"
        SpawnedProcess(self.proc).signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT, if the process exists: harmless to one that was not paused."""
        if self.proc is not None:
            SpawnedProcess(self.proc).signal(signal.SIGCONT)
        self.paused = False

    def _close_listener(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
