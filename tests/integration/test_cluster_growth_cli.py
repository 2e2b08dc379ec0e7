"""Growing a local cluster: `replog cluster up --brokers 4`, then `replog cluster add-broker` starts broker 5,
which registers, is listed by every broker, takes replicas of a new topic, and stops with `cluster down`."""

import json
import subprocess
import sys
from pathlib import Path

from replog.cluster_nodes.manifest import CLUSTER_FILE, load_manifest
from replog.cluster_nodes.nodes import kill_nodes
from replog.harness.processes import is_running_as

CLI = [sys.executable, "-m", "replog"]
TIMEOUT_S = 90


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=TIMEOUT_S)


def bring_down(root: Path) -> None:
    if (root / CLUSTER_FILE).exists() and run("cluster", "down", "--data-dir", str(root)).returncode != 0:
        kill_nodes(load_manifest(root).nodes)


def test_add_broker_grows_a_four_broker_cluster_to_five(tmp_path):
    data = ["--data-dir", str(tmp_path)]
    try:
        up = run("cluster", "up", "--controllers", "1", "--brokers", "4", *data)
        assert up.returncode == 0, up.stderr

        added = run("cluster", "add-broker", *data)
        assert added.returncode == 0, added.stderr
        assert added.stdout.startswith("broker 5: started")
        manifest = json.loads((tmp_path / CLUSTER_FILE).read_text())
        assert [b["id"] for b in manifest["brokers"]] == [1, 2, 3, 4, 5]
        broker_5 = manifest["brokers"][4]
        assert is_running_as(broker_5["pid"], broker_5["argv"])
        assert f"127.0.0.1:{broker_5['port']}" in manifest["bootstrap"].split(",")
        assert (tmp_path / "broker-5.properties").stat().st_mode & 0o777 == 0o600

        status = run("cluster", "status", "--json", *data)
        assert status.returncode == 0, status.stdout + status.stderr
        nodes = {n["id"]: n for n in json.loads(status.stdout)["nodes"]}
        assert nodes[5]["role"] == "broker" and nodes[5]["alive"] and nodes[5]["serving"]

        # Only with broker 5 registered and unfenced can a topic have five replicas.
        server = ["--bootstrap-server", f"127.0.0.1:{broker_5['port']}"]
        created = run("topics", "create", *server, "--topic", "wide", "--partitions", "1",
                      "--replication-factor", "5")  # fmt: skip
        assert created.returncode == 0, created.stderr
        described = run("topics", "describe", *server, "--topic", "wide")
        assert described.returncode == 0, described.stderr
        replicas = described.stdout.split("Replicas: ")[1].split()[0]
        assert sorted(int(r) for r in replicas.split(",")) == [1, 2, 3, 4, 5]

        down = run("cluster", "down", *data)
        assert down.returncode == 0, down.stderr
        assert down.stdout.count("stopped (SIGTERM)") == 6
    finally:
        bring_down(tmp_path)


def test_add_broker_without_a_cluster_says_so(tmp_path):
    result = run("cluster", "add-broker", "--data-dir", str(tmp_path))
    assert result.returncode == 1 and "cluster.json not found" in result.stderr
