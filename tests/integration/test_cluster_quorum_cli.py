"""`replog cluster` with a quorum of controllers, on real processes: `up` starts three by default, `status --json`
marks the active one, `kill-node` of it makes another active that the brokers follow, `start-node` brings it
back as a follower, `stop-node` of the active one hands over at once (EndQuorumEpoch), and `down` stops the
brokers before the controllers. Whatever fails, the cluster is brought down."""

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from replog.client.quorum_admin import describe_controller_cluster
from replog.cluster_nodes.manifest import CLUSTER_FILE, load_manifest
from replog.cluster_nodes.nodes import kill_nodes

CLI = [sys.executable, "-m", "replog"]
TIMEOUT_S = 90
FAILOVER_DEADLINE_S = 20.0  # Kafka's default quorum timeouts elect in about 1-3.5 s; the machine is shared
# With the fetch timeout this long, a follower that waited it out would stand only after 30 s: a new leader
# sooner can only come from the resigning leader's EndQuorumEpoch (KIP-595).
LONG_FETCH_TIMEOUT_MS = 30_000
HANDOVER_DEADLINE_S = 15.0


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=TIMEOUT_S)


def status(root: Path) -> dict:
    result = run("cluster", "status", "--json", "--data-dir", str(root))
    return json.loads(result.stdout)


def wait_for_status(root: Path, condition: Callable[[dict], bool], what: str, timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        current = status(root)
        if condition(current):
            return current
        assert time.monotonic() < deadline, f"timed out waiting for {what}; last status: {current}"
        time.sleep(0.1)  # each status is a few round trips and a process start; no need to spin


def active_ids(data: dict) -> list[int]:
    return [n["id"] for n in data["nodes"] if n["active"]]


def up(root: Path, *args: str) -> None:
    result = run("cluster", "up", "--data-dir", str(root), *args)
    assert result.returncode == 0, result.stderr


def bring_down(root: Path) -> None:
    """`cluster down`; if that fails, SIGKILL whatever cluster.json still records as running."""
    if (root / CLUSTER_FILE).exists() and run("cluster", "down", "--data-dir", str(root)).returncode != 0:
        kill_nodes(load_manifest(root).nodes)


@pytest.fixture
def three_controllers(tmp_path):
    try:
        up(tmp_path, "--brokers", "2", "--controller-override", "broker.session.timeout.ms=3000",
           "--override", "broker.heartbeat.interval.ms=500")  # fmt: skip
        yield tmp_path
    finally:
        bring_down(tmp_path)


def test_cluster_up_starts_three_controllers_and_fails_over_from_the_active_one(three_controllers):
    root = three_controllers
    data = ["--data-dir", str(root)]
    manifest = json.loads((root / CLUSTER_FILE).read_text())
    assert list(manifest) == ["bootstrap", "controllers", "brokers"]
    assert [c["id"] for c in manifest["controllers"]] == [3000, 3001, 3002]
    assert [c["data_dir"] for c in manifest["controllers"]] == [
        str(root / "controller"), str(root / "controller-3001"), str(root / "controller-3002")]  # fmt: skip
    assert all(set(c) == {"id", "pid", "port", "data_dir", "argv"} for c in manifest["controllers"])

    before = status(root)  # `up` returned: a controller is active and every broker registered
    assert [(n["id"], n["role"]) for n in before["nodes"]] == [
        (3000, "controller"), (3001, "controller"), (3002, "controller"), (1, "broker"), (2, "broker")]
    assert all(n["alive"] and n["serving"] for n in before["nodes"])
    assert all(set(n) == {"id", "role", "active", "alive", "serving", "pid", "port"} for n in before["nodes"])
    [old] = active_ids(before)
    quorum = before["quorum"]
    assert (quorum["leader_id"], sorted(v["id"] for v in quorum["voters"])) == (old, [3000, 3001, 3002])
    assert set(quorum) == {"leader_id", "epoch", "high_watermark", "voters"}

    assert run("cluster", "kill-node", str(old), *data).returncode == 0
    after = wait_for_status(root, lambda s: len(active_ids(s)) == 1 and active_ids(s) != [old],
                            "another active controller", FAILOVER_DEADLINE_S)
    [new] = active_ids(after)
    assert after["quorum"]["epoch"] > quorum["epoch"]
    assert {n["id"]: n["alive"] for n in after["nodes"]}[old] is False
    # Any controller names the new active one in DescribeCluster (KIP-919), and so does metadata-quorum.
    survivors = [("127.0.0.1", c["port"]) for c in manifest["controllers"] if c["id"] != old]
    assert asyncio.run(describe_controller_cluster(survivors[::-1])) == ("replog-cluster", new)
    described = run("metadata-quorum", "--bootstrap-controller", ",".join(f"{h}:{p}" for h, p in survivors),
                    "describe", "--status")
    assert "ClusterId:            replog-cluster" in described.stdout, described.stdout + described.stderr
    assert f"LeaderId:             {new}" in described.stdout
    # The brokers follow the new active controller: a topic created through each of them (forwarded to it)
    # reaches every broker's metadata with a leader for each partition.
    for broker in manifest["brokers"]:
        topic = f"after-failover-{broker['id']}"
        created = run("topics", "create", "--bootstrap-server", f"127.0.0.1:{broker['port']}", "--topic", topic,
                      "--partitions", "2", "--replication-factor", "2")  # fmt: skip
        assert created.returncode == 0, created.stderr
        for other in manifest["brokers"]:
            described = run("topics", "describe", "--bootstrap-server", f"127.0.0.1:{other['port']}",
                            "--topic", topic)  # fmt: skip
            assert described.returncode == 0 and described.stdout.count("Leader: ") == 2, described.stdout
            assert "Leader: none" not in described.stdout

    assert run("cluster", "start-node", str(old), *data).returncode == 0
    back = wait_for_status(
        root, lambda s: all(n["alive"] and n["serving"] for n in s["nodes"]) and s["quorum"] is not None
        and all(v["lag"] == 0 for v in s["quorum"]["voters"]), "the restarted controller to catch up", TIMEOUT_S)
    assert active_ids(back) == [new]  # it came back as a follower: no election, the same leader and epoch
    assert back["quorum"]["epoch"] == after["quorum"]["epoch"]
    assert run("cluster", "status", *data).returncode == 0

    down = run("cluster", "down", *data)
    assert down.returncode == 0, down.stderr
    names = [line.split(":")[0] for line in down.stdout.splitlines()]
    assert names == ["broker-1", "broker-2", "controller", "controller-3001", "controller-3002"]
    assert all("stopped (SIGTERM)" in line for line in down.stdout.splitlines())


def test_stopping_the_active_controller_hands_over_before_the_fetch_timeout(tmp_path):
    data = ["--data-dir", str(tmp_path)]
    try:
        up(tmp_path, "--brokers", "1", "--controller-override",
           f"controller.quorum.fetch.timeout.ms={LONG_FETCH_TIMEOUT_MS}")
        before = status(tmp_path)
        [old] = active_ids(before)
        stopped_at = time.monotonic()
        stopped = run("cluster", "stop-node", str(old), *data)
        assert stopped.returncode == 0 and "stopped (SIGTERM)" in stopped.stdout, stopped.stdout + stopped.stderr
        after = wait_for_status(tmp_path, lambda s: len(active_ids(s)) == 1 and active_ids(s) != [old],
                                "a new active controller well before the fetch timeout", HANDOVER_DEADLINE_S)
        # Usually the next epoch; a split vote between the two left (both standing at once) costs another.
        assert after["quorum"]["epoch"] > before["quorum"]["epoch"]
        print(f"new active controller {active_ids(after)} {time.monotonic() - stopped_at:.2f} s after the stop")
    finally:
        bring_down(tmp_path)


def test_cluster_up_with_one_controller_writes_the_single_controller_manifest(tmp_path):
    data = ["--data-dir", str(tmp_path)]
    try:
        up(tmp_path, "--controllers", "1", "--brokers", "1")
        manifest = json.loads((tmp_path / CLUSTER_FILE).read_text())
        assert list(manifest) == ["bootstrap", "controller", "brokers"]
        assert manifest["controller"]["id"] == 3000
        assert "controller.quorum.voters" not in (tmp_path / "controller.properties").read_text()
        current = status(tmp_path)
        assert active_ids(current) == [3000]
        assert [v["id"] for v in current["quorum"]["voters"]] == [3000]
        assert run("cluster", "kill-node", "3000", *data).returncode == 0
        assert status(tmp_path)["quorum"] is None  # nobody leads: a quorum of one is down with its controller
        assert run("cluster", "start-node", "3000", *data).returncode == 0
        wait_for_status(tmp_path, lambda s: active_ids(s) == [3000], "the controller to lead again", TIMEOUT_S)
    finally:
        bring_down(tmp_path)


def test_cluster_up_refuses_a_controller_count_out_of_range(tmp_path):
    result = run("cluster", "up", "--controllers", "0", "--data-dir", str(tmp_path))
    assert result.returncode == 2 and "--controllers must be between 1 and 9" in result.stderr
    assert not (tmp_path / CLUSTER_FILE).exists()
