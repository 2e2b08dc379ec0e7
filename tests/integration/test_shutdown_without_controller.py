"""A broker told to stop while no controller answers (its test was killed, and the in-process controller with
it) exits by itself, cleanly, once its controlled.shutdown.max.retries attempts to reach one have failed: not
after the 30 s a controlled shutdown may wait for an answering controller, nor by SIGKILL."""

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from replog.harness.local_cluster import LocalCluster

RETRIES, BACKOFF_MS = 3, 1_000
CONTROLLED_SHUTDOWN_MAX_WAIT_S = 30.0  # replog.broker.server's cap while a controller answers


async def test_a_broker_whose_controller_is_gone_exits_cleanly_after_its_retries(tmp_path):
    cluster = LocalCluster(tmp_path, brokers=1, overrides={
        "controlled.shutdown.max.retries": str(RETRIES), "controlled.shutdown.retry.backoff.ms": str(BACKOFF_MS)})
    await cluster.start()
    try:
        await cluster.controller.create_topic("led", {0: [1]})  # something to hand over
        await cluster.wait_for(lambda: cluster.controller.registration("led", 0).leader == 1, 10.0, "its leadership")
        await cluster.stop_controller()
        started = time.monotonic()
        # SIGKILL only past half the cap: a broker that waited the cap out would be killed, not exit with 0.
        exit_code = await asyncio.to_thread(cluster.brokers[1].stop, CONTROLLED_SHUTDOWN_MAX_WAIT_S / 2)
        took_s = time.monotonic() - started
        assert exit_code == 0
        assert took_s >= (RETRIES - 1) * BACKOFF_MS / 1000  # it did try the controller, backing off between
        assert "could not be reached in 3 attempts" in cluster.brokers[1].output.read_text()
    finally:
        await cluster.stop()


# A test process with a one-broker LocalCluster (its controller in-process); it prints the broker's pid.
TEST_PROCESS = """
import asyncio, sys
from pathlib import Path
from replog.harness.local_cluster import LocalCluster

async def main():
    cluster = LocalCluster(Path(sys.argv[1]), brokers=1)
    await cluster.start()
    await cluster.controller.create_topic("led", {0: [1]})
    print(cluster.brokers[1].proc.pid, flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def has_exited(pid: int) -> bool:
    """Gone, or a zombie no one has reaped yet (its parent, the killed test process, cannot)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_the_broker_of_a_killed_test_process_exits_long_before_the_controlled_shutdown_cap(tmp_path):
    """The harness defect: a SIGKILLed pytest took its in-process controller with it, and its brokers
    (told by parent_watch to stop) waited out the controlled shutdown's 30 s for that controller."""
    test_process = subprocess.Popen([sys.executable, "-c", TEST_PROCESS, str(tmp_path)], stdout=subprocess.PIPE,
                                    text=True)
    broker_pid = None
    try:
        broker_pid = int(test_process.stdout.readline())
        test_process.kill()
        test_process.wait(10)
        deadline = time.monotonic() + CONTROLLED_SHUTDOWN_MAX_WAIT_S / 2
        while not has_exited(broker_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert has_exited(broker_pid)
    finally:
        test_process.kill()
        if broker_pid is not None and not has_exited(broker_pid):
            os.kill(broker_pid, signal.SIGKILL)
