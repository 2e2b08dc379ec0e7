"""The harness's process helpers on real child processes: a listening socket handed down and served on, the
ready file waited for, fail-fast on an early exit, and the pid checks that keep a reused pid from being
mistaken for (or signalled as) a node."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replog.harness.processes import (
    ExitedBeforeReady,
    NotReadyInTime,
    RecordedProcess,
    SpawnedProcess,
    StopOutcome,
    is_running_as,
    kill_processes,
    launch,
    listening_socket,
    process_cmdline,
    read_ready_file,
    stop_processes,
    wait_until_ready,
)
from replog.server.listener_socket import LISTENER_FDS_ENV
from replog.server.parent_watch import EXIT_WITH_PARENT_ENV

# A server in miniature: serves one connection on the inherited socket for its address, after the ready file.
SERVE_ONCE = """
import sys
from replog.server.listener_socket import inherited_listener, write_ready_file
sock = inherited_listener("127.0.0.1", int(sys.argv[1]))
write_ready_file(port=sock.getsockname()[1], metrics_port=None)
connection, _ = sock.accept()
connection.sendall(b"served")
"""


def test_a_node_serves_on_the_socket_handed_down_and_reports_its_port(tmp_path):
    listener = listening_socket()
    port = listener.getsockname()[1]
    proc = launch([sys.executable, "-c", SERVE_ONCE, str(port)], tmp_path / "out", ready_file=tmp_path / "ready",
                  listeners=[listener])
    listener.close()  # the child has its own copy: the port stays held
    try:
        (ready,) = wait_until_ready([SpawnedProcess(proc)], [tmp_path / "ready"], time.monotonic() + 30)
        assert (ready.pid, ready.port, ready.metrics_port) == (proc.pid, port, None)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
            assert client.recv(16) == b"served"
        assert proc.wait(10) == 0
    finally:
        kill_processes([SpawnedProcess(proc)])


def test_launch_removes_a_stale_ready_file_and_passes_no_listeners_it_was_not_given(tmp_path, monkeypatch):
    (tmp_path / "ready").write_text('{"pid": 1, "port": 1, "metrics_port": null}')
    monkeypatch.setenv(LISTENER_FDS_ENV, "7")  # ours, perhaps; never the child's
    proc = launch([sys.executable, "-c", f"import os; print(os.environ.get({LISTENER_FDS_ENV!r}))"],
                  tmp_path / "out", ready_file=tmp_path / "ready")
    assert proc.wait(30) == 0
    assert read_ready_file(tmp_path / "ready") is None
    assert (tmp_path / "out").read_text() == "None\n"


def test_waiting_fails_fast_when_the_process_exits_before_it_serves(tmp_path):
    proc = launch([sys.executable, "-c", "raise SystemExit(3)"], tmp_path / "out", ready_file=tmp_path / "ready")
    started = time.monotonic()
    with pytest.raises(ExitedBeforeReady):
        wait_until_ready([SpawnedProcess(proc)], [tmp_path / "ready"], time.monotonic() + 60)
    assert time.monotonic() - started < 30


def test_waiting_names_the_processes_not_ready_at_the_deadline(tmp_path):
    (tmp_path / "ready-0").write_text('{"pid": 1, "port": 1, "metrics_port": 2}')
    sleepers = [SpawnedProcess(subprocess.Popen(["sleep", "30"])) for _ in range(2)]
    try:
        with pytest.raises(NotReadyInTime) as failure:
            wait_until_ready(sleepers, [tmp_path / "ready-0", tmp_path / "ready-1"], time.monotonic() + 0.2)
        assert failure.value.pending == [1]
    finally:
        assert kill_processes(sleepers) == [StopOutcome.KILLED, StopOutcome.KILLED]


def test_stop_sigterms_then_sigkills_a_spawned_process_that_ignores_sigterm():
    stuck = SpawnedProcess(subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                               "print(flush=True); time.sleep(30)"], stdout=subprocess.PIPE))
    stuck.proc.stdout.readline()  # the handler is in place
    assert stop_processes([stuck], timeout=0.2) == [StopOutcome.KILLED_AFTER_TIMEOUT]
    assert stuck.proc.returncode == -signal.SIGKILL
    assert stop_processes([stuck], timeout=0.2) == [StopOutcome.NOT_RUNNING]


def test_a_pid_counts_as_the_node_only_while_it_runs_the_recorded_argv():
    own = process_cmdline(os.getpid())
    assert own
    assert is_running_as(os.getpid(), own)
    assert not is_running_as(os.getpid(), [sys.executable, "-m", "replog", "broker", "start"])  # reused pid
    assert not is_running_as(None, own)
    assert not is_running_as(_unused_pid(), own)


def test_a_recorded_pid_that_runs_something_else_is_never_signalled():
    stranger = RecordedProcess(os.getpid(), ["replog-that-exited"])
    assert not stranger.signal(signal.SIGKILL)
    assert stranger.has_exited()  # and we are still here


def spawn_sleep(**spawn_options) -> RecordedProcess:
    """A `sleep 30` child known only by pid, once /proc shows its argv (exec is not finished when spawn
    returns)."""
    argv = ["sleep", "30"]
    process = RecordedProcess(os.posix_spawnp(argv[0], argv, os.environ, **spawn_options), argv)
    deadline = time.monotonic() + 5
    while not is_running_as(process.pid, argv):
        assert time.monotonic() < deadline, "sleep did not start"
        time.sleep(0.001)
    return process


def test_an_exited_child_counts_as_exited_and_is_reaped():
    process = spawn_sleep()  # no Popen: nothing but has_exited may reap it
    try:
        assert not process.has_exited()
    finally:
        os.kill(process.pid, signal.SIGKILL)
    os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)  # now a zombie: exited but not reaped
    assert process_cmdline(process.pid) == []
    assert process.has_exited()
    with pytest.raises(ChildProcessError):
        os.waitpid(process.pid, os.WNOHANG)  # has_exited reaped it


def _unused_pid() -> int:
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


@pytest.mark.parametrize("detached", [False, True])
def test_launch_makes_an_attached_node_stop_with_us_and_a_detached_one_outlive_us(tmp_path, monkeypatch, detached):
    monkeypatch.setenv(EXIT_WITH_PARENT_ENV, "1")  # what our own parent told us; never the child's
    proc = launch([sys.executable, "-c", f"import os; print(os.environ.get({EXIT_WITH_PARENT_ENV!r}))"],
                  tmp_path / "out", detached=detached)
    assert proc.wait(30) == 0
    assert (tmp_path / "out").read_text() == ("None\n" if detached else f"{os.getpid()}\n")
