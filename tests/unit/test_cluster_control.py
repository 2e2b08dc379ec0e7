"""`replog cluster` without a cluster: planning ports, properties and argv, cluster.json, and the pid checks
that keep a reused pid from being mistaken for (or signalled as) a node."""

import json
import os
import signal
import time
from pathlib import Path

import pytest

from replog.client.cluster import BrokerInfo
from replog.client.quorum_admin import QuorumInfo, ReplicaState
from replog.cluster_control import ClusterStatus, NodeStatus, format_status, status_json
from replog.cluster_nodes.manifest import (
    CLUSTER_FILE,
    ClusterError,
    ClusterManifest,
    Node,
    Role,
    load_manifest,
    save_manifest,
)
from replog.cluster_nodes.nodes import stop_nodes
from replog.cluster_nodes.plan import (
    CONTROLLER_ID,
    added_broker_properties,
    base_ports,
    format_properties,
    plan_cluster,
)
from replog.harness.processes import StopOutcome, is_running_as, process_cmdline
from replog.server.properties import parse_properties

SECRET = "ab" * 16


def plan(root: Path, **kwargs) -> tuple[ClusterManifest, dict[str, dict[str, str]]]:
    node_ports, metrics_ports = base_ports(4, 19000)
    return plan_cluster(root, 3, node_ports, metrics_ports=metrics_ports, secret=SECRET,
                        python="/venv/bin/python", **kwargs)


def test_plan_gives_the_controller_the_base_port_and_broker_i_base_plus_i(tmp_path):
    manifest, _ = plan(tmp_path)
    assert (manifest.controller.id, manifest.controller.port) == (CONTROLLER_ID, 19000)
    assert [(b.id, b.port) for b in manifest.brokers] == [(1, 19001), (2, 19002), (3, 19003)]
    assert manifest.bootstrap == "127.0.0.1:19001,127.0.0.1:19002,127.0.0.1:19003"
    assert manifest.controller.data_dir == tmp_path / "controller"
    assert manifest.brokers[1].data_dir == tmp_path / "broker-2"
    assert all(n.pid is None for n in manifest.nodes)


def test_plan_argv_starts_each_node_from_its_properties_file(tmp_path):
    manifest, _ = plan(tmp_path)
    assert manifest.controller.argv == [
        "/venv/bin/python", "-m", "replog", "controller", "start", "--config",
        str(tmp_path / "controller.properties"),
    ]  # fmt: skip
    assert manifest.brokers[0].argv == [
        "/venv/bin/python", "-m", "replog", "broker", "start", "--config", str(tmp_path / "broker-1.properties"),
    ]  # fmt: skip
    assert manifest.log_path(manifest.brokers[2]) == tmp_path / "broker-3.log"


def test_plan_properties_wire_brokers_to_the_controller_with_one_secret(tmp_path):
    _, properties = plan(
        tmp_path,
        broker_overrides={"replica.lag.time.max.ms": "2000"},
        controller_overrides={"broker.session.timeout.ms": "3000"},
    )
    assert properties["controller"] == {
        "node.id": "3000",
        "listeners": "PLAINTEXT://127.0.0.1:19000",
        "metadata.log.dir": str(tmp_path / "controller"),
        "inter.broker.secret": SECRET,
        "metrics.port": "19004",
        "metrics.dump.dir": str(tmp_path / "metrics" / "controller"),
        "broker.session.timeout.ms": "3000",
    }
    assert properties["broker-2"] == {
        "node.id": "2",
        "listeners": "PLAINTEXT://127.0.0.1:19002",
        "log.dirs": str(tmp_path / "broker-2"),
        "controller.quorum.bootstrap.servers": "127.0.0.1:19000",
        "inter.broker.secret": SECRET,
        "metrics.port": "19006",
        "metrics.dump.dir": str(tmp_path / "metrics" / "broker-2"),
        "replica.lag.time.max.ms": "2000",
    }


def test_plan_without_metrics_ports_lets_each_node_pick_one_and_report_it(tmp_path):
    manifest, properties = plan_cluster(tmp_path, 1, [41000, 41001])
    assert [n.port for n in manifest.nodes] == [41000, 41001]
    assert properties["broker-1"]["listeners"] == "PLAINTEXT://127.0.0.1:41001"
    assert properties["broker-1"]["controller.quorum.bootstrap.servers"] == "127.0.0.1:41000"
    assert {properties[n.name]["metrics.port"] for n in manifest.nodes} == {"0"}
    assert manifest.ready_path(manifest.brokers[0]) == tmp_path.resolve() / "broker-1.ready"


def test_plan_draws_a_fresh_secret_per_cluster(tmp_path):
    first = plan_cluster(tmp_path, 1, [41000, 41001])[1]["controller"]["inter.broker.secret"]
    second = plan_cluster(tmp_path, 1, [41000, 41001])[1]["controller"]["inter.broker.secret"]
    assert len(first) == 32 and first != second


@pytest.mark.parametrize("overrides", [{"broker_overrides": {"node.id": "7"}},
                                       {"controller_overrides": {"listeners": "PLAINTEXT://x:1"}}])  # fmt: skip
def test_plan_refuses_overrides_of_keys_it_sets(tmp_path, overrides):
    with pytest.raises(ValueError, match="sets"):
        plan(tmp_path, **overrides)


@pytest.mark.parametrize("brokers", [0, 33])
def test_plan_bounds_the_broker_count(tmp_path, brokers):
    with pytest.raises(ValueError, match="--brokers"):
        plan_cluster(tmp_path, brokers, [41000] * (brokers + 1))


def test_base_ports_stay_below_65536():
    assert base_ports(2, 65532) == ([65532, 65533], [65534, 65535])
    with pytest.raises(ValueError, match="--base-port"):
        base_ports(2, 65533)


def test_properties_file_reads_back_with_the_broker_parser():
    props = {"node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:9092", "log.dirs": "/tmp/a b/c"}
    assert parse_properties(format_properties(props)) == props


def test_properties_with_a_line_break_are_refused():
    with pytest.raises(ValueError, match="line break"):
        format_properties({"log.dirs": "/tmp\ninter.broker.secret=guess"})


def test_cluster_json_has_the_documented_shape_and_round_trips(tmp_path):
    manifest, _ = plan(tmp_path)
    manifest.controller.pid = 100
    manifest.brokers[0].pid = 101
    save_manifest(manifest)
    data = json.loads((tmp_path / CLUSTER_FILE).read_text())
    assert list(data) == ["bootstrap", "controller", "brokers"]
    assert data["bootstrap"] == manifest.bootstrap
    assert data["controller"] == {
        "id": 3000, "pid": 100, "port": 19000, "data_dir": str(tmp_path / "controller"),
        "argv": manifest.controller.argv,
    }  # fmt: skip
    assert [b["pid"] for b in data["brokers"]] == [101, None, None]
    assert load_manifest(tmp_path) == manifest


def test_a_failed_cluster_json_update_leaves_the_previous_file_whole(tmp_path, monkeypatch):
    manifest, _ = plan(tmp_path)
    save_manifest(manifest)
    before = (tmp_path / CLUSTER_FILE).read_bytes()
    manifest.brokers[0].pid = 4242

    def crash(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        save_manifest(manifest)
    assert (tmp_path / CLUSTER_FILE).read_bytes() == before


def test_missing_cluster_json_names_the_directory(tmp_path):
    with pytest.raises(ClusterError, match="no cluster was started with --data-dir"):
        load_manifest(tmp_path)


def test_unknown_node_id_lists_the_known_ones(tmp_path):
    manifest, _ = plan(tmp_path)
    with pytest.raises(ClusterError, match=r"no node 9 .*nodes: 3000, 1, 2, 3"):
        manifest.node(9)


def test_stop_never_signals_a_pid_that_now_runs_something_else():
    stranger = Node(1, Role.BROKER, 9092, Path("/nowhere"), ["replog-that-exited"], pid=os.getpid())
    assert stop_nodes([stranger], timeout=0.1) == {"broker-1": StopOutcome.NOT_RUNNING}
    assert stranger.pid is None  # forgotten, and we are still here


def spawn_sleep(node_id: int, **spawn_options) -> Node:
    """A `sleep 30` child as a node, once /proc shows its argv (exec is not finished when spawn returns)."""
    argv = ["sleep", "30"]
    pid = os.posix_spawnp(argv[0], argv, os.environ, **spawn_options)
    node = Node(node_id, Role.BROKER, 9092, Path("/nowhere"), argv, pid=pid)
    deadline = time.monotonic() + 5
    while not is_running_as(node.pid, argv):
        assert time.monotonic() < deadline, "sleep did not start"
        time.sleep(0.001)
    return node


def test_stop_sigterms_all_and_sigkills_those_that_outlast_the_timeout():
    prompt = spawn_sleep(1)
    stuck = spawn_sleep(2, setsigmask={signal.SIGTERM})  # SIGTERM stays pending, like a hung shutdown
    stuck_pid = stuck.pid
    assert stop_nodes([prompt, stuck], timeout=0.5) == {
        "broker-1": StopOutcome.STOPPED,
        "broker-2": StopOutcome.KILLED_AFTER_TIMEOUT,
    }
    assert prompt.pid is None and stuck.pid is None
    assert process_cmdline(stuck_pid) is None  # gone and reaped


def test_status_table_and_metadata_line(tmp_path):
    manifest, _ = plan(tmp_path)
    manifest.brokers[0].pid = 4242
    status = ClusterStatus(
        [NodeStatus(n, n.pid is not None, n.pid is not None) for n in manifest.nodes],
        {1: BrokerInfo(1, "127.0.0.1", 19001)},
    )
    lines = format_status(status).splitlines()
    assert lines[0].split() == ["NODE", "ROLE", "PID", "PORT", "ALIVE", "SERVING"]
    assert lines[1].split() == ["3000", "controller", "-", "19000", "no", "no"]
    assert lines[2].split() == ["1", "broker", "4242", "19001", "yes", "yes"]
    assert lines[-1] == "brokers in the cluster metadata: 1 (127.0.0.1:19001)"
    assert not status.all_up


def three_controllers(tmp_path: Path) -> ClusterManifest:
    """A manifest as `cluster up --controllers 3` will write it: controllers 3000..3002, then the brokers."""
    manifest, _ = plan(tmp_path)
    extra = [Node(CONTROLLER_ID + i, Role.CONTROLLER, 19100 + i, tmp_path / f"controller-{CONTROLLER_ID + i}",
                  ["python", "-m", "replog", "controller", "start"]) for i in (1, 2)]
    return ClusterManifest(tmp_path, [manifest.controller, *extra], manifest.brokers)


def test_cluster_json_lists_several_controllers_and_reads_them_back(tmp_path):
    manifest = three_controllers(tmp_path)
    save_manifest(manifest)
    data = json.loads((tmp_path / CLUSTER_FILE).read_text())
    assert list(data) == ["bootstrap", "controllers", "brokers"]
    assert [c["id"] for c in data["controllers"]] == [3000, 3001, 3002]
    assert load_manifest(tmp_path) == manifest
    assert [n.name for n in manifest.nodes[:3]] == ["controller", "controller-3001", "controller-3002"]
    assert manifest.node(3002).port == 19102


def test_cluster_json_without_any_controller_is_refused(tmp_path):
    (tmp_path / CLUSTER_FILE).write_text(json.dumps({"bootstrap": "", "controllers": [], "brokers": []}))
    with pytest.raises(ClusterError, match="unreadable.*no controller"):
        load_manifest(tmp_path)


def quorum_led_by(leader_id: int) -> QuorumInfo:
    voters = tuple(ReplicaState(i, 10 - (i - CONTROLLER_ID), 5, 5) for i in range(CONTROLLER_ID, CONTROLLER_ID + 3))
    return QuorumInfo(leader_id, 4, 9, voters, ())


def test_status_marks_the_quorum_leader_as_the_active_controller(tmp_path):
    manifest = three_controllers(tmp_path)
    status = ClusterStatus([NodeStatus(n, True, True) for n in manifest.nodes], {}, quorum_led_by(3001))
    lines = format_status(status).splitlines()
    assert lines[0].split() == ["NODE", "ROLE", "PID", "PORT", "ALIVE", "SERVING"]
    assert [line.split()[1] for line in lines[1:4]] == ["controller", "controller(active)", "controller"]
    assert lines[-2] == "metadata quorum: leader 3001, epoch 4, high watermark 9"
    no_leader = ClusterStatus(status.nodes, {}, None)
    assert "(active)" not in format_status(no_leader)
    assert format_status(no_leader).splitlines()[-2].startswith("metadata quorum: unknown")


def test_status_json_has_the_issues_shape(tmp_path):
    manifest = three_controllers(tmp_path)
    manifest.brokers[0].pid = 4242
    statuses = [NodeStatus(n, n.pid is not None, n.id != 3002) for n in manifest.nodes]
    data = json.loads(json.dumps(status_json(ClusterStatus(statuses, None, quorum_led_by(3000)))))
    assert [(n["id"], n["role"], n["active"]) for n in data["nodes"]] == [
        (3000, "controller", True), (3001, "controller", False), (3002, "controller", False),
        (1, "broker", False), (2, "broker", False), (3, "broker", False)]
    assert data["nodes"][3] == {"id": 1, "role": "broker", "active": False, "alive": True, "serving": True,
                                "pid": 4242, "port": 19001}
    assert data["nodes"][2]["serving"] is False
    assert data["quorum"] == {"leader_id": 3000, "epoch": 4, "high_watermark": 9, "voters": [
        {"id": 3000, "log_end_offset": 10, "lag": 0}, {"id": 3001, "log_end_offset": 9, "lag": 1},
        {"id": 3002, "log_end_offset": 8, "lag": 2}]}
    assert status_json(ClusterStatus(statuses, None, None))["quorum"] is None


def test_plan_of_three_controllers_makes_them_voters_and_the_brokers_bootstrap_from_all(tmp_path):
    node_ports, metrics_ports = base_ports(5, 19000)
    manifest, properties = plan_cluster(tmp_path, 2, node_ports, controllers=3, metrics_ports=metrics_ports,
                                        secret=SECRET, python="/venv/bin/python")
    assert [(c.id, c.port, c.data_dir.name) for c in manifest.controllers] == [
        (3000, 19000, "controller"), (3001, 19001, "controller-3001"), (3002, 19002, "controller-3002")]
    assert [(b.id, b.port) for b in manifest.brokers] == [(1, 19003), (2, 19004)]
    voters = "3000@127.0.0.1:19000,3001@127.0.0.1:19001,3002@127.0.0.1:19002"
    assert {properties[c.name]["controller.quorum.voters"] for c in manifest.controllers} == {voters}
    assert properties["controller-3002"]["metrics.port"] == "19007"
    assert properties["broker-1"]["controller.quorum.bootstrap.servers"] == (
        "127.0.0.1:19000,127.0.0.1:19001,127.0.0.1:19002")
    assert manifest.controllers[1].argv[-1] == str(tmp_path / "controller-3001.properties")


@pytest.mark.parametrize("controllers", [0, 10])
def test_plan_bounds_the_controller_count(tmp_path, controllers):
    with pytest.raises(ValueError, match="--controllers"):
        plan_cluster(tmp_path, 1, [41000] * (controllers + 1), controllers=controllers)


def test_added_broker_properties_keep_the_overrides_and_take_the_new_identity(tmp_path):
    manifest, properties = plan(tmp_path, broker_overrides={"num.partitions": "6"})
    new = Node(4, Role.BROKER, 19100, tmp_path / "broker-4", [])
    added = added_broker_properties(properties["broker-1"], tmp_path, new)
    assert (added["node.id"], added["listeners"], added["log.dirs"]) == (
        "4", "PLAINTEXT://127.0.0.1:19100", str(tmp_path / "broker-4"))
    assert added["metrics.port"] == "0" and added["metrics.dump.dir"].endswith("broker-4")
    for kept in ("num.partitions", "inter.broker.secret", "controller.quorum.bootstrap.servers"):
        assert added[kept] == properties["broker-1"][kept]
