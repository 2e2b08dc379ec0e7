"""`replog analyze` on the dumps of a real 3-broker cluster: a producer at a known rate, one follower killed
and restarted. The analysis must find the under-replicated interval the controller saw (each edge within
2 s) and the produce rate (within 10%)."""

import asyncio
import csv
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replog.harness.local_cluster import LocalCluster
from tests.integration.test_metrics import dump_lines

confluent_kafka = pytest.importorskip("confluent_kafka")
pytest.importorskip("pyspark")
if shutil.which("java") is None:
    pytest.skip("PySpark needs a Java runtime: apt-get install openjdk-17-jre-headless (.ci/run does)",
                allow_module_level=True)

TOPIC = "analyzed"
LEADER, FOLLOWER = 1, 3
RECORDS_PER_S = 400
TICK_S = 0.05  # the producer sends RECORDS_PER_S * TICK_S records every tick, on a fixed schedule
VALUE = b"r" * 500
PRODUCE_S = 24
KILL_AT_S, RESTART_AT_S = 5, 13
WINDOW_S = 2
ANALYZE_TIMEOUT_S = 240


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def produce_paced(bootstrap: str) -> tuple[int, int, int]:
    """Produce RECORDS_PER_S for PRODUCE_S (acks=1: a dead follower does not stall the leader's appends);
    returns (first send ms, last send ms, records acknowledged)."""
    acked = []
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5})
    per_tick = round(RECORDS_PER_S * TICK_S)
    started = time.monotonic()
    first_ms = wall_ms()
    for tick in range(round(PRODUCE_S / TICK_S)):
        time.sleep(max(0.0, started + tick * TICK_S - time.monotonic()))
        for _ in range(per_tick):
            producer.produce(TOPIC, VALUE, partition=0, on_delivery=lambda err, msg: acked.append(err is None))
        producer.poll(0)
    last_ms = wall_ms()
    assert producer.flush(30) == 0
    assert all(acked)
    return first_ms, last_ms, len(acked)


async def watch_under_replicated(cluster: LocalCluster, stop: asyncio.Event) -> list[int]:
    """The wall-clock times the controller's ISR of the partition went short of, and back to, all replicas."""
    edges, short = [], False
    while not stop.is_set():
        registration = cluster.controller.registration(TOPIC, 0)
        if (len(registration.isr) < len(registration.replicas)) != short:
            short = not short
            edges.append(wall_ms())
        await asyncio.sleep(0.05)
    return edges


def leader_dumped_whole_isr(cluster: LocalCluster) -> bool:
    snapshots = [line for line in dump_lines(cluster.metrics_dir / f"broker-{LEADER}")
                 if line["kind"] == "broker" and line["partitions"]]
    return bool(snapshots) and snapshots[-1]["partitions"][0]["isr"] == [LEADER, 2, FOLLOWER]


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


async def test_analyze_finds_the_under_replicated_interval_and_the_produce_rate(tmp_path):
    cluster = LocalCluster(tmp_path / "cluster")
    try:
        await cluster.start()
        await cluster.controller.create_topic(TOPIC, {0: [LEADER, 2, FOLLOWER]}, {"min.insync.replicas": "2"})
        stop_watching = asyncio.Event()
        watching = asyncio.create_task(watch_under_replicated(cluster, stop_watching))
        producing = asyncio.create_task(asyncio.to_thread(produce_paced, cluster.bootstrap))
        await asyncio.sleep(KILL_AT_S)
        await cluster.kill(FOLLOWER)
        await asyncio.sleep(RESTART_AT_S - KILL_AT_S)
        await cluster.restart(FOLLOWER)
        await cluster.wait_for_isr(TOPIC, 0, {LEADER, 2, FOLLOWER})
        first_ms, last_ms, produced = await producing
        # The end of the interval is in the leader's dumps only once it has written the whole ISR.
        await cluster.wait_for(lambda: leader_dumped_whole_isr(cluster), 10, "a leader dump of the whole ISR")
        stop_watching.set()
        truth = await watching
    finally:
        stopping_ms = wall_ms()
        await cluster.stop()
    assert len(truth) == 2, f"expected one under-replicated interval, the controller saw edges {truth}"

    out = tmp_path / "analysis"
    done = subprocess.run(
        [sys.executable, "-m", "replog", "analyze", "--metrics", str(cluster.metrics_dir), "--out", str(out),
         "--window", str(WINDOW_S), "--master", "local[2]"],
        capture_output=True, text=True, timeout=ANALYZE_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "report.html").exists()

    # The clean stop at the end is a controlled shutdown of each broker in turn, which shrinks ISRs too.
    intervals = [row for row in read_csv(out / "csv" / "under_replicated_intervals.csv")
                 if row["condition"] == "under_replicated" and row["topic"] == TOPIC
                 and int(row["start_ms"]) < stopping_ms]
    assert len(intervals) == 1, intervals
    (interval,) = intervals
    assert abs(int(interval["start_ms"]) - truth[0]) <= 2000, (interval, truth)
    assert abs(int(interval["end_ms"]) - truth[1]) <= 2000, (interval, truth)

    windows = [row for row in read_csv(out / "csv" / "throughput_by_topic.csv") if row["topic"] == TOPIC]
    # Every record the leader appended is counted once, whichever window it falls in.
    assert sum(int(row["produce_records"]) for row in windows) == produced
    inside = [row for row in windows if first_ms + WINDOW_S * 1000 <= int(row["window_start_ms"])
              and int(row["window_start_ms"]) + WINDOW_S * 1000 <= last_ms - WINDOW_S * 1000]
    assert len(inside) >= 5, windows
    rate = sum(float(row["produce_records_per_s"]) for row in inside) / len(inside)
    assert abs(rate - RECORDS_PER_S) <= 0.1 * RECORDS_PER_S, (rate, inside)
