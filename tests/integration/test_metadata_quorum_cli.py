"""`replog metadata-quorum describe` and `replog cluster status [--json]` against real controllers: a
`replog cluster up` cluster (a quorum of one, in processes) and three in-process QuorumShells (DescribeQuorum
directly, and `cluster status` over a cluster.json that lists them)."""

import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
from kio.schema.errors import ErrorCode

from replog.client.errors import KafkaError
from replog.client.quorum_admin import QuorumInfo, describe_quorum
from replog.cluster_control import cluster_status, format_status, status_json
from replog.cluster_nodes.manifest import (
    CLUSTER_FILE,
    ClusterManifest,
    Node,
    Role,
    load_manifest,
    save_manifest,
)
from replog.cluster_nodes.nodes import kill_nodes
from replog.cluster_nodes.quorum_report import format_quorum_replication, max_follower_lag
from replog.harness.local_cluster import LocalCluster
from tests.conditions import POLL_INTERVAL_S
from tests.integration.test_raft_quorum import HOST, _append, _start_quorum, _wait_for_leader

CLI = [sys.executable, "-m", "replog"]
TIMEOUT_S = 60


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=TIMEOUT_S)


def status_fields(stdout: str) -> dict[str, str]:
    return {name: value.strip() for name, value in (line.split(":", 1) for line in stdout.splitlines())}


async def describe_until(addresses, condition: Callable[[QuorumInfo], bool], what: str,
                         timeout_s: float = 10.0) -> QuorumInfo:
    """Ask DescribeQuorum until its answer meets `condition` (the followers' progress arrives with their next
    fetch)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition(quorum := await describe_quorum(addresses)):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}: {quorum}")
        await asyncio.sleep(POLL_INTERVAL_S)
    return quorum


@pytest.fixture
def cluster(tmp_path):
    up = run("cluster", "up", "--controllers", "1", "--brokers", "2", "--data-dir", str(tmp_path))
    assert up.returncode == 0, up.stderr
    try:
        yield load_manifest(tmp_path)
    finally:
        if run("cluster", "down", "--data-dir", str(tmp_path)).returncode != 0 and (tmp_path / CLUSTER_FILE).exists():
            kill_nodes(load_manifest(tmp_path).nodes)


def test_metadata_quorum_and_cluster_status_describe_a_quorum_of_one(cluster):
    controller = f"{HOST}:{cluster.controller.port}"
    before_ms = int(time.time() * 1000)

    status = run("metadata-quorum", "--bootstrap-controller", controller, "describe", "--status")
    assert status.returncode == 0, status.stderr
    fields = status_fields(status.stdout)
    assert list(fields) == ["ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark", "MaxFollowerLag",
                            "MaxFollowerLagTimeMs", "CurrentVoters", "CurrentObservers"]
    assert fields["LeaderId"] == "3000" and int(fields["LeaderEpoch"]) >= 1
    assert int(fields["HighWatermark"]) > 0  # the brokers' registrations are committed
    assert (fields["MaxFollowerLag"], fields["MaxFollowerLagTimeMs"]) == ("0", "0")
    assert fields["CurrentVoters"] == "[3000]"
    assert fields["ClusterId"] == "replog-cluster"  # the controller's DescribeCluster (KIP-919)

    # an unreachable controller first: the next one in the list answers
    with socket.socket() as unused:
        unused.bind((HOST, 0))
        nobody = f"{HOST}:{unused.getsockname()[1]}"
    replication = run("metadata-quorum", "--bootstrap-controller", f"{nobody},{controller}", "describe",
                      "--replication")
    assert replication.returncode == 0, replication.stderr
    header, leader, *others = [line.split() for line in replication.stdout.splitlines()]
    assert header == ["NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"]
    assert (leader[0], leader[2], leader[5]) == ("3000", "0", "Leader") and others == []
    assert int(leader[1]) >= int(fields["HighWatermark"])
    # ms since the epoch (KIP-836), not the controller's monotonic clock
    assert before_ms - 600_000 <= int(leader[3]) <= int(time.time() * 1000) + 1000

    readable = run("metadata-quorum", "--bootstrap-controller", controller, "describe", "--replication",
                   "--human-readable")
    assert readable.returncode == 0, readable.stderr
    ago = readable.stdout.splitlines()[1].split()
    assert ago[0] == "3000" and ago[4:6] == ["ms", "ago"] and int(ago[3]) < 600_000

    # a broker is no controller: it does not offer DescribeQuorum
    broker = run("metadata-quorum", "--bootstrap-controller", f"{HOST}:{cluster.brokers[0].port}", "describe",
                 "--status")
    assert broker.returncode == 1 and "UNSUPPORTED_VERSION" in broker.stderr, broker.stderr

    table = run("cluster", "status", "--data-dir", str(cluster.root))
    assert table.returncode == 0, table.stdout + table.stderr
    rows = {line.split()[0]: line.split() for line in table.stdout.splitlines()[1:] if line[:1].isdigit()}
    assert rows["3000"][1] == "controller(active)" and rows["1"][1] == "broker"
    assert "metadata quorum: leader 3000, epoch" in table.stdout

    as_json = run("cluster", "status", "--json", "--data-dir", str(cluster.root))
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert [(n["id"], n["role"], n["active"], n["alive"], n["serving"]) for n in data["nodes"]] == [
        (3000, "controller", True, True, True), (1, "broker", False, True, True), (2, "broker", False, True, True)]
    assert [n["port"] for n in data["nodes"]] == [n.port for n in cluster.nodes]
    assert data["quorum"]["leader_id"] == 3000 and data["quorum"]["epoch"] == int(fields["LeaderEpoch"])
    assert [(v["id"], v["lag"]) for v in data["quorum"]["voters"]] == [(3000, 0)]

    # exit status as before: 1 when a node is down; with the controller down, no quorum to report
    assert run("cluster", "kill-node", "3000", "--data-dir", str(cluster.root)).returncode == 0
    down = run("cluster", "status", "--json", "--data-dir", str(cluster.root))
    assert down.returncode == 1
    data = json.loads(down.stdout)
    assert data["quorum"] is None
    assert data["nodes"][0] == {"id": 3000, "role": "controller", "active": False, "alive": False,
                                "serving": False, "pid": None, "port": cluster.controller.port}
    refused = run("metadata-quorum", "--bootstrap-controller", controller, "describe", "--status")
    assert refused.returncode == 1 and "NETWORK_EXCEPTION" in refused.stderr

    # restarted, it leads again in a later epoch (and the brokers can shut down through it)
    assert run("cluster", "start-node", "3000", "--data-dir", str(cluster.root)).returncode == 0
    again = json.loads(run("cluster", "status", "--json", "--data-dir", str(cluster.root)).stdout)
    assert again["nodes"][0]["active"] is True
    assert again["quorum"]["epoch"] > int(fields["LeaderEpoch"])


async def test_describe_quorum_of_three_finds_the_leader_and_every_voters_progress(tmp_path):
    members = await _start_quorum(tmp_path, 3)
    try:
        leader = await _wait_for_leader(members)
        for i in range(10):
            await _append(members, b"v%d" % i)
        leader = await _wait_for_leader(members)
        followers = [m for m in members if m is not leader]
        addresses = [(HOST, m.shell.config.voters[m.node_id][1]) for m in [*followers, leader]]

        with pytest.raises(KafkaError) as refused:  # a follower does not describe the quorum
            await describe_quorum(addresses[:1])
        assert refused.value.code == ErrorCode.not_leader_or_follower

        # The leader reports its flushed end (as Kafka's LeaderState does), which may trail for a moment what
        # the followers already fetched and the HW counts; wait for its flush too.
        quorum = await describe_until(addresses, lambda q: q.leader_id == leader.node_id
                                      and max_follower_lag(q)[0] == 0 and q.leader is not None
                                      and q.high_watermark == q.leader.log_end_offset,
                                      "every follower caught up and the leader flushed")
        assert [v.replica_id for v in quorum.voters] == sorted(m.node_id for m in members)
        assert quorum.leader_epoch == leader.shell.node.epoch
        assert quorum.high_watermark == quorum.leader.log_end_offset
        assert all(v.last_fetch_timestamp > 0 for v in quorum.voters)
        rows = [line.split() for line in format_quorum_replication(quorum).splitlines()[1:]]
        assert [(r[0], r[5]) for r in rows] == [(str(leader.node_id), "Leader")] + [
            (str(m.node_id), "Follower") for m in sorted(followers, key=lambda m: m.node_id)]
    finally:
        for member in members:
            await member.stop()


async def test_cluster_status_marks_the_leader_among_three_controllers(tmp_path):
    members = await _start_quorum(tmp_path / "quorum", 3)
    try:
        leader = await _wait_for_leader(members)
        await _append(members, b"x")
        leader = await _wait_for_leader(members)
        # cluster.json as `cluster up --controllers 3` will write it; no pids: these controllers run in this test
        controllers = [Node(m.node_id, Role.CONTROLLER, m.shell.config.voters[m.node_id][1], m.shell.directory,
                            ["not", "a", "process"]) for m in members]
        save_manifest(ClusterManifest(tmp_path, controllers, []))
        status = await asyncio.to_thread(cluster_status, tmp_path)  # it runs its own event loop
        assert [s.serving for s in status.nodes] == [True, True, True]
        assert [status.is_active(s.node) for s in status.nodes] == [m is leader for m in members]
        data = status_json(status)
        assert [n["active"] for n in data["nodes"]] == [m is leader for m in members]
        assert data["quorum"]["leader_id"] == leader.node_id
        assert [v["id"] for v in data["quorum"]["voters"]] == [m.node_id for m in members]
        assert f"{leader.node_id}  controller(active)" in format_status(status)
    finally:
        for member in members:
            await member.stop()


async def test_describe_quorum_follows_the_active_controller_through_a_failover(tmp_path):
    """Three ClusterControllers with brokers (LocalCluster): DescribeQuorum names the active controller, and
    after it stops, the new one, in a later epoch."""
    cluster = LocalCluster(tmp_path, controllers=3, brokers=1)
    try:
        await cluster.start()
        addresses = [(HOST, c.port) for c in cluster.controllers.values()]
        old = await cluster.wait_for_active_controller()
        quorum = await describe_until(addresses, lambda q: q.leader_id == old.controller_id, "the active leader")
        assert [v.replica_id for v in quorum.voters] == sorted(cluster.controllers)
        assert quorum.leader_epoch == old.controller_epoch
        await cluster.stop_controller(old.controller_id)
        new = await cluster.wait_for_active_controller()
        running = [(HOST, c.port) for i, c in cluster.controllers.items() if i != old.controller_id]
        after = await describe_until(running, lambda q: q.leader_id == new.controller_id, "the new leader")
        assert after.leader_epoch > quorum.leader_epoch
    finally:
        await cluster.stop()
