"""Replication throttles (KIP-73) during a reassignment: `replog reassign --execute --throttle` limits the move
to the rate, measured over the whole move, while produce to an unthrottled partition on the same brokers goes
on undelayed."""

import asyncio
import json
import subprocess
import sys
import threading
import time

import pytest

from replog.harness.local_cluster import LocalCluster

confluent_kafka = pytest.importorskip("confluent_kafka")

CLI = [sys.executable, "-m", "replog"]
RATE = 1_000_000  # bytes/s
MOVED_BYTES = 8_000_000
# The rate is measured over windows of 1 s; with two of them a quiet quota lets about one window's worth
# through at once (Kafka's Rate pads the span to windows - 1), and a fetch may overshoot by one response.
QUOTA_OVERRIDES = {"replication.quota.window.num": "2", "replication.quota.window.size.seconds": "1",
                   "replica.fetch.max.bytes": "262144"}
TOLERANCE = 1.3


@pytest.fixture
async def cluster(tmp_path):
    cluster = LocalCluster(tmp_path, brokers=4, overrides=QUOTA_OVERRIDES)
    try:
        await cluster.start()
        yield cluster
    finally:
        await cluster.stop()


async def cli(*args: str) -> subprocess.CompletedProcess:
    return await asyncio.to_thread(subprocess.run, [*CLI, *args], capture_output=True, timeout=60)


def fill(bootstrap: str, topic: str, nbytes: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                                         "compression.type": "none"})
    value = bytes(range(256)) * 40  # 10 KiB, incompressible enough: the throttle counts bytes on the wire
    for _ in range(nbytes // len(value)):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0


class LatencyProbe:
    """acks=all produce of small records to an unthrottled topic, one in flight at a time: each latency."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.latencies: list[float] = []
        self._stop = threading.Event()
        self._producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
        self._thread = threading.Thread(target=self._run, args=(topic,), daemon=True)

    def _run(self, topic: str) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self._producer.produce(topic, b"probe", partition=0)
            assert self._producer.flush(30) == 0
            self.latencies.append(time.monotonic() - started)
            time.sleep(0.02)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(35)


async def test_throttled_move_stays_under_the_rate_while_unthrottled_produce_goes_on(cluster, tmp_path):
    server = ["--bootstrap-server", cluster.bootstrap]
    for topic in ("big", "free"):
        created = await cli("topics", "create", *server, "--topic", topic, "--replication-factor", "2")
        assert created.returncode == 0, created.stderr
    await cluster.wait_for(lambda: {"big", "free"} <= set(cluster.controller.metadata.topics), 10, "topics")
    await asyncio.to_thread(fill, cluster.bootstrap, "big", MOVED_BYTES)
    current = cluster.controller.registration("big", 0).replicas
    newcomer = min(b for b in cluster.brokers if b not in current)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "big", "partition": 0, "replicas": [current[0], newcomer]}]}))

    with LatencyProbe(cluster.bootstrap, "free") as probe:
        await cluster.wait_for(lambda: len(probe.latencies) >= 20, 30, "produce before the move")
        before = sorted(probe.latencies)
        execute = asyncio.create_task(cli("reassign", *server, "--execute", "--reassignment-json-file", str(plan),
                                          "--throttle", str(RATE)))
        # The move's time: from the reassignment's start in the controller (the throttles are set before it)
        # to its completion, polled every 50 ms.
        await cluster.wait_for(lambda: cluster.controller.registration("big", 0).is_reassigning or execute.done(),
                               30, "the reassignment to start")
        started = time.monotonic()
        during_from = len(probe.latencies)
        await cluster.wait_for(lambda: not cluster.controller.registration("big", 0).is_reassigning, 60,
                               "the throttled move to complete")
        elapsed = time.monotonic() - started
        during = sorted(probe.latencies[during_from:])
        executed = await execute
        assert executed.returncode == 0, executed.stderr

    moved = sum(f.stat().st_size for f in cluster.log_dir(newcomer, "big", 0).glob("*.log"))
    assert moved >= MOVED_BYTES
    measured = moved / elapsed
    assert measured <= RATE * TOLERANCE, f"moved {moved} B in {elapsed:.1f} s: {measured:.0f} B/s over {RATE}"
    # Produce to the unthrottled partition went on through the move, without the move's seconds of delay.
    assert len(during) >= 20
    p99_during = during[int(len(during) * 0.99) - 1]
    assert p99_during < 1.0, f"p99 {p99_during:.3f} s during the move (before: {before[-1]:.3f} s)"
