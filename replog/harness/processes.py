"""Launch a server process with the listening socket it will serve on, wait until it serves, stop it.

Every node the harness starts (BrokerProcess, `replog cluster up`) goes the same way. The harness binds the
node's listening socket itself and hands it down (replog/server/listener_socket.py), so the port is known
before the node starts and nobody can take it in between; a node started again binds that same port, as a
restarted Kafka broker binds its configured listener. The node writes a ready file once it serves, with the
ports it got (its metrics port is 0, any). Its output is appended to a log file. Stopping is SIGTERM, a
deadline, then SIGKILL.

A process is watched through a handle: a Popen the caller still holds (SpawnedProcess), or a pid that an
earlier command recorded (RecordedProcess), which counts as the node only while /proc/<pid>/cmdline equals
the recorded argv, so a pid the kernel has handed to another process is never signalled (Linux only).
"""

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from replog.server.listener_socket import LISTENER_FDS_ENV, READY_FILE_ENV, format_listener_fds
from replog.server.parent_watch import EXIT_WITH_PARENT_ENV

HOST = "127.0.0.1"
LISTEN_BACKLOG = 1024  # as the broker's own; the node listens on the socket again with its own backlog
READY_POLL_INTERVAL_S = 0.01  # a stat of the ready file: cheap
EXIT_POLL_INTERVAL_S = 0.05
EXEC_TIMEOUT_S = 5.0
EXEC_POLL_INTERVAL_S = 0.001  # exec completes within microseconds to milliseconds
KILL_TIMEOUT_S = 10.0  # SIGKILL cannot be caught, but a process in uninterruptible I/O exits late
OUTPUT_TAIL_LINES = 30


class StopOutcome(StrEnum):
    NOT_RUNNING = "was not running"
    STOPPED = "stopped (SIGTERM)"
    KILLED = "killed (SIGKILL)"
    KILLED_AFTER_TIMEOUT = "killed (SIGKILL) after SIGTERM timed out"


class ProcessHandle(Protocol):
    def signal(self, signum: int) -> bool:
        """Send the signal if the process still runs; whether it was sent."""

    def has_exited(self) -> bool: ...


class SpawnedProcess:
    """A child we started and still hold the Popen of."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc

    def signal(self, signum: int) -> bool:
        if self.has_exited():
            return False
        self.proc.send_signal(signum)
        return True

    def has_exited(self) -> bool:
        return self.proc.poll() is not None


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


class RecordedProcess:
    """A process known by its pid and argv, perhaps started by an earlier command."""

    def __init__(self, pid: int | None, argv: Sequence[str]) -> None:
        self.pid = pid
        self.argv = list(argv)

    def signal(self, signum: int) -> bool:
        if not is_running_as(self.pid, self.argv):
            return False
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            return False  # exited between the check and the signal
        return True

    def has_exited(self) -> bool:
        """True once the process is gone, a zombie, or its pid runs something else. Reaps it when it is our
        own child, so it does not linger as a zombie."""
        if self.pid is None:
            return True
        try:
            os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            pass  # not our child
        return not is_running_as(self.pid, self.argv)


# launching


def listening_socket(host: str = HOST, port: int = 0) -> socket.socket:
    """A socket bound to host:port (0: any free port) and listening, to hand down to a node."""
    return socket.create_server((host, port), backlog=LISTEN_BACKLOG)


def launch(argv: Sequence[str], output: Path, *, ready_file: Path | None = None,
           listeners: Sequence[socket.socket] = (), env: Mapping[str, str] | None = None,
           detached: bool = False) -> subprocess.Popen:
    """Start a node that serves on `listeners` (sockets we hold; the caller closes its copies once the node
    has them) and writes `ready_file` once serving (a replog node; None for others); its stdout and stderr
    are appended to `output`. A detached node runs in a session of its own: it outlives us and our
    terminal's signals; any other replog node stops when we exit."""
    child_env = {k: v for k, v in (os.environ if env is None else env).items()
                 if k not in (LISTENER_FDS_ENV, READY_FILE_ENV, EXIT_WITH_PARENT_ENV)}
    if not detached:  # if we are killed before we stop it, it stops itself (server/parent_watch.py)
        child_env[EXIT_WITH_PARENT_ENV] = str(os.getpid())
    if ready_file is not None:
        ready_file.unlink(missing_ok=True)  # whatever a previous run left says nothing about this one
        child_env[READY_FILE_ENV] = str(ready_file)
    fds = [s.fileno() for s in listeners]
    if fds:
        child_env[LISTENER_FDS_ENV] = format_listener_fds(fds)
    with open(output, "ab") as out:
        return subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env=child_env, pass_fds=fds, start_new_session=detached)


def wait_until_exec_done(proc: subprocess.Popen, argv: Sequence[str]) -> None:
    """Return once /proc shows the node's argv (or it has exited): Popen returns as soon as exec has begun,
    and until the kernel has set up the new argv its pid would not count as the node (RecordedProcess)."""
    deadline = time.monotonic() + EXEC_TIMEOUT_S
    while not is_running_as(proc.pid, argv) and proc.poll() is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"pid {proc.pid} does not show its argv {EXEC_TIMEOUT_S}s after exec")
        time.sleep(EXEC_POLL_INTERVAL_S)


# waiting until they serve


@dataclass(frozen=True, slots=True)
class Ready:
    """What a node's ready file reports once it serves."""

    pid: int
    port: int
    metrics_port: int | None
    listener_ports: dict[str, int] = field(default_factory=dict)  # every listener's port, by name


def read_ready_file(path: Path) -> Ready | None:
    """The node's report, or None before it serves. The node writes the file atomically: never half of it."""
    try:
        report = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    return Ready(int(report["pid"]), int(report["port"]),
                 None if report["metrics_port"] is None else int(report["metrics_port"]),
                 {name: int(port) for name, port in report.get("listener_ports", {}).items()})


class ExitedBeforeReady(Exception):
    def __init__(self, index: int) -> None:
        super().__init__(f"process {index} exited before it served")
        self.index = index


class NotReadyInTime(Exception):
    def __init__(self, pending: list[int]) -> None:
        super().__init__(f"processes {pending} did not serve in time")
        self.pending = pending


def wait_until_ready(processes: Sequence[ProcessHandle], ready_files: Sequence[Path], deadline: float,
                     poll_interval_s: float = READY_POLL_INTERVAL_S) -> list[Ready]:
    """Poll until each process's ready file is there, and return their reports in order. Fails fast with
    ExitedBeforeReady when one exits first, and with NotReadyInTime at the deadline (time.monotonic())."""
    assert len(processes) == len(ready_files)
    reports: list[Ready | None] = [None] * len(processes)
    while True:
        pending = [i for i, report in enumerate(reports) if report is None]
        for i in pending:
            reports[i] = read_ready_file(ready_files[i])
            if reports[i] is None and processes[i].has_exited():
                raise ExitedBeforeReady(i)
        if all(report is not None for report in reports):
            return reports  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise NotReadyInTime([i for i, report in enumerate(reports) if report is None])
        time.sleep(poll_interval_s)


# stopping


class StillRunning(Exception):
    def __init__(self, indexes: list[int]) -> None:
        super().__init__(f"processes {indexes} still run {KILL_TIMEOUT_S}s after SIGKILL")
        self.indexes = indexes


def wait_for_exits(processes: Sequence[ProcessHandle], timeout: float) -> list[int]:
    """Poll until every process has exited or the timeout passes; returns the indexes of those still running."""
    deadline = time.monotonic() + timeout
    running = [i for i, p in enumerate(processes) if not p.has_exited()]
    while running and time.monotonic() < deadline:
        time.sleep(EXIT_POLL_INTERVAL_S)
        running = [i for i in running if not processes[i].has_exited()]
    return running


def stop_processes(processes: Sequence[ProcessHandle], timeout: float) -> list[StopOutcome]:
    """SIGTERM all at once, wait for all, SIGKILL those still running at the timeout; raises StillRunning
    when one outlasts the SIGKILL too."""
    signalled = [i for i, p in enumerate(processes) if p.signal(signal.SIGTERM)]
    late = [signalled[i] for i in wait_for_exits([processes[i] for i in signalled], timeout)]
    killed = [i for i in late if processes[i].signal(signal.SIGKILL)]
    if still := wait_for_exits([processes[i] for i in killed], KILL_TIMEOUT_S):
        raise StillRunning([killed[i] for i in still])

    def outcome(i: int) -> StopOutcome:
        if i not in signalled:
            return StopOutcome.NOT_RUNNING
        return StopOutcome.KILLED_AFTER_TIMEOUT if i in killed else StopOutcome.STOPPED

    return [outcome(i) for i in range(len(processes))]


def kill_processes(processes: Sequence[ProcessHandle]) -> list[StopOutcome]:
    """SIGKILL, as a crash would, and wait until they are gone; raises StillRunning if one is not."""
    killed = [i for i, p in enumerate(processes) if p.signal(signal.SIGKILL)]
    if still := wait_for_exits([processes[i] for i in killed], KILL_TIMEOUT_S):
        raise StillRunning([killed[i] for i in still])
    return [StopOutcome.KILLED if i in killed else StopOutcome.NOT_RUNNING for i in range(len(processes))]


def output_tail(path: Path, lines: int = OUTPUT_TAIL_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) or "(empty)"
    except OSError:
        return "(no output)"
