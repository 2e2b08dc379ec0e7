"""Broker and controller metrics on a real 3-broker cluster: the Prometheus endpoint of the partition's
leader and the dump files of every node follow a follower's death and return (docs/metrics-dumps.md)."""

import asyncio
import json
import urllib.request
from pathlib import Path

import pytest

from replog.harness.local_cluster import LocalCluster
from tests.integration.test_replication import MIN_ISR_2, produce, values

pytest.importorskip("confluent_kafka")

TOPIC = "measured"
LEADER, FOLLOWER = 1, 3
# The leader drops the dead follower from the ISR after replica.lag.time.max.ms (2 s here), well before the
# controller fences it: the shrink is the leader's own, which is what IsrShrinksPerSec counts.
SESSION_TIMEOUT_MS = 6_000


@pytest.fixture
async def cluster(tmp_path):
    cluster = LocalCluster(tmp_path, session_timeout_ms=SESSION_TIMEOUT_MS)
    try:
        await cluster.start()
        yield cluster
    finally:
        await cluster.stop()


def scrape(port: int) -> dict[str, float]:
    """The endpoint's samples, `name{labels}` -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def dump_lines(directory: Path) -> list[dict]:
    """The complete lines of a node's dumps (the node is running: its last line may be half written)."""
    lines = []
    for path in sorted(directory.glob("metrics-*.jsonl")):
        complete, _, _ = path.read_text().rpartition("\n")
        lines += [json.loads(line) for line in complete.splitlines()]
    return lines


def last_controller_gauges(cluster: LocalCluster) -> dict:
    return [line for line in dump_lines(cluster.metrics_dir / "controller") if line["kind"] == "controller"][-1][
        "controller"]


def leader_snapshot_with_isr(directory: Path, isr: list[int]) -> bool:
    return any(line["kind"] == "broker" and line["partitions"] and line["partitions"][0]["isr"] == isr
               and line["partitions"][0]["leader"] == LEADER for line in dump_lines(directory)[-1:])


async def test_a_dead_follower_shows_in_the_leaders_metrics_and_dumps_until_it_rejoins(cluster):
    await cluster.controller.create_topic(TOPIC, {0: [LEADER, 2, FOLLOWER]}, MIN_ISR_2)
    acked = await asyncio.to_thread(produce, cluster.bootstrap, TOPIC, values("m", 300))
    assert len(acked) == 300
    port = cluster.metrics_ports[LEADER]
    healthy = await asyncio.to_thread(scrape, port)
    assert healthy[f'kafka_server_brokertopicmetrics_messagesin_total{{topic="{TOPIC}"}}'] == 300
    assert healthy["kafka_server_replicamanager_leadercount"] == 1
    assert healthy["kafka_server_replicamanager_underreplicatedpartitions"] == 0
    assert healthy[f'kafka_server_brokertopicmetrics_replicationbytesout_total{{topic="{TOPIC}"}}'] > 0

    await cluster.kill(FOLLOWER)
    # acks=all: these complete once the leader has shrunk the ISR to {1, 2}.
    assert len(await asyncio.to_thread(produce, cluster.bootstrap, TOPIC, values("n", 200))) == 200
    await cluster.wait_for_isr(TOPIC, 0, {LEADER, 2})
    await cluster.wait_for(lambda: scrape(port)["kafka_server_replicamanager_underreplicatedpartitions"] == 1,
                           10, "the leader to report one under-replicated partition")
    shrunk = await asyncio.to_thread(scrape, port)
    assert shrunk["kafka_server_replicamanager_isrshrinks_total"] == 1
    assert shrunk["kafka_server_replicamanager_atminisrpartitioncount"] == 1
    assert shrunk[f'replog_partition_follower_lag_ms{{follower="{FOLLOWER}",partition="0",topic="{TOPIC}"}}'] > 0

    await cluster.restart(FOLLOWER)
    await cluster.wait_for_isr(TOPIC, 0, {LEADER, 2, FOLLOWER})
    await cluster.wait_for(lambda: scrape(port)["kafka_server_replicamanager_underreplicatedpartitions"] == 0,
                           10, "the leader to report no under-replicated partition")
    assert (await asyncio.to_thread(scrape, port))["kafka_server_replicamanager_isrexpands_total"] == 1
    leader_dumps = cluster.metrics_dir / f"broker-{LEADER}"
    await cluster.wait_for(lambda: leader_snapshot_with_isr(leader_dumps, [1, 2, 3]), 10,
                           "a dump of the whole ISR again")

    leader_lines = dump_lines(leader_dumps)
    assert {line["kind"] for line in leader_lines} == {"start", "broker", "isr_change"}
    assert all(line["v"] == 1 and line["node_id"] == LEADER for line in leader_lines)
    changes = [(c["isr_before"], c["isr_after"], c["source"]) for c in leader_lines if c["kind"] == "isr_change"]
    assert changes == [([], [1, 2, 3], "controller"), ([1, 2, 3], [1, 2], "leader"), ([1, 2], [1, 2, 3], "leader")]
    snapshots = [line for line in leader_lines if line["kind"] == "broker" and line["partitions"]]
    assert any(s["broker"]["under_replicated_partitions"] == 1 for s in snapshots)
    assert snapshots[-1]["broker"]["under_replicated_partitions"] == 0
    last = snapshots[-1]["partitions"][0]
    assert (last["topic"], last["leader"], last["isr"], last["log_end_offset"]) == (TOPIC, LEADER, [1, 2, 3], 500)
    assert {f["broker_id"]: f["lag_messages"] for f in last["followers"]} == {2: 0, FOLLOWER: 0}
    assert snapshots[-1]["broker"]["messages_in_total"] == 500
    # While it was down (out of the ISR), the dead follower's lag grew to the 200 records it missed in the
    # leader's dumps. Dumps from before the kill are left out: a loaded machine can catch it mid-way through
    # copying the first 300.
    assert max(f["lag_messages"] for s in snapshots if s["partitions"][0]["isr"] == [LEADER, 2]
               for f in s["partitions"][0]["followers"] if f["broker_id"] == FOLLOWER) == 200

    follower_lines = dump_lines(cluster.metrics_dir / f"broker-{FOLLOWER}")
    assert sum(1 for line in follower_lines if line["kind"] == "start") == 2  # killed, then started again
    # The controller dumps once a second: wait for a line written after the follower was unfenced again.
    await cluster.wait_for(lambda: last_controller_gauges(cluster)["active_broker_count"] == 3, 5,
                           "a controller dump with every broker active")
    assert {k: last_controller_gauges(cluster)[k] for k in (
        "active_controller_count", "active_broker_count", "fenced_broker_count", "offline_partitions_count",
        "global_partition_count")} == {
        "active_controller_count": 1, "active_broker_count": 3, "fenced_broker_count": 0,
        "offline_partitions_count": 0, "global_partition_count": 1}
