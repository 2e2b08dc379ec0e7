"""`replog cluster` end to end on real processes: up, status, an RF=3 topic as kcat sees it, kill-node and
start-node, the usage errors, and down; whatever fails, the cluster is brought down."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from replog.cluster_nodes.manifest import CLUSTER_FILE, load_manifest
from replog.cluster_nodes.nodes import kill_nodes
from replog.harness.processes import is_running_as

CLI = [sys.executable, "-m", "replog"]
TIMEOUT_S = 60
# Short session and lag times so a killed broker leaves, and a restarted one rejoins, within the test.
FAST_FAILURE_DETECTION = [
    "--controller-override", "broker.session.timeout.ms=3000",
    "--override", "broker.heartbeat.interval.ms=500",
    "--override", "replica.lag.time.max.ms=2000",
]  # fmt: skip


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=TIMEOUT_S)


def cluster_json(root: Path) -> dict:
    return json.loads((root / CLUSTER_FILE).read_text())


def bring_down(root: Path) -> None:
    """`cluster down`; if that fails, SIGKILL whatever cluster.json still records as running."""
    if not (root / CLUSTER_FILE).exists():
        return
    if run("cluster", "down", "--data-dir", str(root)).returncode != 0:
        kill_nodes(load_manifest(root).nodes)


def status_rows(stdout: str) -> dict[int, list[str]]:
    """NODE -> [ROLE, PID, PORT, ALIVE, SERVING] from the status table."""
    rows = [line.split() for line in stdout.splitlines()[1:] if line[:1].isdigit()]
    return {int(row[0]): row[1:] for row in rows}


def test_cluster_lifecycle(tmp_path):
    data = ["--data-dir", str(tmp_path)]
    try:
        up = run("cluster", "up", "--controllers", "1", "--brokers", "3", *data, *FAST_FAILURE_DETECTION)
        assert up.returncode == 0, up.stderr
        manifest = cluster_json(tmp_path)
        bootstrap = manifest["bootstrap"]
        assert up.stdout.splitlines()[0] == bootstrap
        assert set(manifest) == {"bootstrap", "controller", "brokers"}
        assert [b["id"] for b in manifest["brokers"]] == [1, 2, 3]
        assert bootstrap == ",".join(f"127.0.0.1:{b['port']}" for b in manifest["brokers"])
        for node in [manifest["controller"], *manifest["brokers"]]:
            assert set(node) == {"id", "pid", "port", "data_dir", "argv"}
            assert node["argv"][:3] == [sys.executable, "-m", "replog"]
            assert is_running_as(node["pid"], node["argv"])
        assert (tmp_path / "broker-2.properties").stat().st_mode & 0o777 == 0o600

        status = run("cluster", "status", *data)
        assert status.returncode == 0, status.stdout + status.stderr
        assert "brokers in the cluster metadata: 1 (" in status.stdout

        again = run("cluster", "up", "--brokers", "3", *data)
        assert again.returncode == 1 and "holds a running cluster" in again.stderr

        server = ["--bootstrap-server", bootstrap]
        created = run("topics", "create", *server, "--topic", "replicated", "--partitions", "3",
                      "--replication-factor", "3", "--config", "min.insync.replicas=2")  # fmt: skip
        assert created.returncode == 0, created.stderr
        if shutil.which("kcat"):
            listing = subprocess.run(["kcat", "-L", "-b", bootstrap, "-t", "replicated"],
                                     capture_output=True, text=True, timeout=TIMEOUT_S)  # fmt: skip
            assert listing.returncode == 0, listing.stderr
            assert " 3 brokers:" in listing.stdout
            partitions = re.findall(r"partition (\d+), leader (-?\d+), replicas: \d+,\d+,\d+", listing.stdout)
            leaders = dict(partitions)
            assert sorted(leaders) == ["0", "1", "2"]
            assert set(leaders.values()) <= {"1", "2", "3"}

        killed = run("cluster", "kill-node", "2", *data)
        assert killed.returncode == 0, killed.stderr
        assert cluster_json(tmp_path)["brokers"][1]["pid"] is None
        status = run("cluster", "status", *data)
        assert status.returncode == 1
        assert status_rows(status.stdout)[2][3:] == ["no", "no"]

        started = run("cluster", "start-node", "2", *data)
        assert started.returncode == 0, started.stderr
        restarted = cluster_json(tmp_path)["brokers"][1]
        assert is_running_as(restarted["pid"], restarted["argv"])
        assert restarted["port"] == manifest["brokers"][1]["port"]
        status = run("cluster", "status", *data)
        assert status.returncode == 0, status.stdout + status.stderr

        unknown = run("cluster", "kill-node", "9", *data)
        assert unknown.returncode == 1 and "no node 9" in unknown.stderr

        down = run("cluster", "down", *data)
        assert down.returncode == 0, down.stderr
        assert down.stdout.count("stopped (SIGTERM)") == 4
        after = cluster_json(tmp_path)
        assert [n["pid"] for n in [after["controller"], *after["brokers"]]] == [None] * 4
        assert run("cluster", "down", *data).returncode == 0  # idempotent
    finally:
        bring_down(tmp_path)


def test_cluster_commands_without_a_cluster_say_so(tmp_path):
    result = run("cluster", "status", "--data-dir", str(tmp_path))
    assert result.returncode == 1
    assert "cluster.json not found" in result.stderr
