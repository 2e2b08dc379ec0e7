"""A node watching its parent (server/parent_watch.py) stops once that process exits, and only then."""

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from replog.server.parent_watch import EXIT_WITH_PARENT_ENV, stop_when_parent_exits
from tests.conditions import wait_until

# The watched node: serves until stopped, then writes "stopped" into the file named by argv[1].
WATCHED_NODE = """
import asyncio, sys
from pathlib import Path
from replog.server.parent_watch import stop_when_parent_exits

async def main():
    stop = asyncio.Event()
    stop_when_parent_exits(asyncio.get_running_loop(), stop.set)
    Path(sys.argv[1] + ".tmp").write_text("watching")
    Path(sys.argv[1] + ".tmp").rename(sys.argv[1])
    await stop.wait()
    Path(sys.argv[1]).write_text("stopped")

asyncio.run(main())
"""

# The node's parent: starts it with the variable naming itself, prints its pid, then waits to be killed.
PARENT = f"""
import os, subprocess, sys, time
env = dict(os.environ, {EXIT_WITH_PARENT_ENV}=str(os.getpid()))
node = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], env=env)
print(node.pid, flush=True)
time.sleep(120)
"""


def is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie has exited: its reaper (init here) has not caught up
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


async def test_node_stops_once_the_parent_is_killed(tmp_path: Path) -> None:
    report = tmp_path / "report"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, WATCHED_NODE, str(report)], stdout=subprocess.PIPE,
                              text=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    try:
        node_pid = int(parent.stdout.readline())
        await wait_until(report.exists, "the node to watch its parent", timeout_s=30)
        assert report.read_text() == "watching"
        assert is_alive(node_pid)
        parent.send_signal(signal.SIGKILL)
        await wait_until(lambda: report.read_text() == "stopped", "the node to stop", timeout_s=10)
        await wait_until(lambda: not is_alive(node_pid), "the node to exit", timeout_s=10)
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()


async def test_unwatched_without_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EXIT_WITH_PARENT_ENV, raising=False)
    stopped = asyncio.Event()
    stop_when_parent_exits(asyncio.get_running_loop(), stopped.set)
    await asyncio.sleep(0)
    assert not stopped.is_set()


async def test_a_living_parent_keeps_the_node_serving(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EXIT_WITH_PARENT_ENV, str(os.getppid()))
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    stop_when_parent_exits(loop, stopped.set)
    await asyncio.sleep(0.05)
    assert not stopped.is_set()


async def test_a_variable_naming_another_process_stops_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Our parent is not that process any more: it died and its pid may have been reused.
    monkeypatch.setenv(EXIT_WITH_PARENT_ENV, str(os.getpid()))
    stopped = asyncio.Event()
    stop_when_parent_exits(asyncio.get_running_loop(), stopped.set)
    await wait_until(stopped.is_set, "the stop", timeout_s=5)
