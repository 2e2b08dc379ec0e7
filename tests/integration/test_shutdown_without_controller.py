"""A broker told to stop while no controller answers (its test was killed, and the in-process controller with
it) exits by itself, cleanly, once its controlled.shutdown.max.retries attempts to reach one have failed: not
after the 30 s a controlled shutdown may wait for an answering controller, nor by SIGKILL."""

import asyncio
import time

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
