"""One `python -m replog <role> start` child process on 127.0.0.1, started, stopped, killed, paused and resumed
by its parent. Its listening socket is bound when the object is made, so `port` is known before the node
starts (brokers are told the controllers' addresses, voters each other's); the first start hands the socket
down, later ones bind the same port. BrokerProcess and ControllerProcess say what command to run."""

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Self

from .processes import (
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


class NodeProcess:
    role = "node"  # the `replog` subcommand: broker or controller

    def __init__(self, data_dir: Path, *, name: str, output: Path, overrides: dict[str, str] | None,
                 env: dict[str, str] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.name = name  # for messages: "broker 2", "controller 3001"
        self.overrides = dict(overrides or {})
        self.output = output
        self.ready_file = output.with_name(f"{output.name}.ready")
        self.env = env  # None: this process's environment
        self.proc: subprocess.Popen | None = None
        self.paused = False  # SIGSTOPped by pause() and not resumed yet
        self._listener = listening_socket()  # handed down by the first launch, then closed
        self.port = self._listener.getsockname()[1]
        self.ready: Ready | None = None  # the running node's report: its pid and ports

    def node_overrides(self) -> dict[str, str]:
        """The keys that make this process this node: its id, listener and data directory."""
        raise NotImplementedError

    @property
    def running(self) -> bool:
        """The process exists (a paused one too)."""
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = READY_TIMEOUT_S) -> None:
        self.launch()
        self.wait_ready(timeout)

    @contextlib.contextmanager
    def started(self, timeout: float = READY_TIMEOUT_S) -> Iterator[Self]:
        """Started and ready for the block, and always stopped when it ends (for tests' fixtures)."""
        self.start(timeout)
        try:
            yield self
        finally:
            self.stop()

    def launch(self) -> None:
        """Start the process without waiting for it to serve."""
        assert not self.running, f"{self.name} already running"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.ready = None
        self.paused = False
        command = [sys.executable, "-m", "replog", self.role, "start"]
        for key, value in {**self.node_overrides(), **self.overrides}.items():
            command += ["--override", f"{key}={value}"]
        listeners = [] if self._listener is None else [self._listener]
        self.proc = launch(command, self.output, ready_file=self.ready_file, listeners=listeners, env=self.env)
        self._close_listener()  # the node has its own copy now

    def wait_ready(self, timeout: float, poll_interval_s: float = READY_POLL_INTERVAL_S) -> None:
        """Wait until the node serves (its ready file is there); kills it at the timeout."""
        try:
            (self.ready,) = wait_until_ready([SpawnedProcess(self.proc)], [self.ready_file],
                                             time.monotonic() + timeout, poll_interval_s)
        except ExitedBeforeReady:
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.output_tail()}") from None
        except NotReadyInTime:
            self.kill()
            raise TimeoutError(f"{self.name} not ready after {timeout}s:\n{self.output_tail()}") from None
        assert self.ready.port == self.port, (self.ready, self.port)

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
        """SIGKILL, as a crash: the logs keep only what was flushed."""
        self._close_listener()
        if self.proc is None:
            return None
        kill_processes([SpawnedProcess(self.proc)])
        self.paused = False
        return self.proc.returncode

    def pause(self) -> None:
        """SIGSTOP: the node stays, silent, as in a long GC pause or a frozen VM, until resume()."""
        assert self.running, f"{self.name} not running"
        SpawnedProcess(self.proc).signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT, if the process exists: harmless to one that was not paused."""
        if self.proc is not None:
            SpawnedProcess(self.proc).signal(signal.SIGCONT)
        self.paused = False

    def restart(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Stop (gracefully) and start again on the same port and data directory."""
        self.stop()
        self.start(timeout)

    def _close_listener(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None

