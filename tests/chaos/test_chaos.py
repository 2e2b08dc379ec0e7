"""The chaos suite against a real local cluster: faults from a seeded nemesis under idempotent acks=all load,
then the queue checker, the replica comparison and the HW catch-up check must find nothing. The short run is
part of every test run; the long ones (several seeds, minutes each) are marked slow."""

import asyncio
import json
import threading

import pytest

from replog import cli
from replog.chaos import nemesis
from replog.chaos.chaos_run_config import HW_CATCH_UP_BOUND_S
from replog.chaos.checker import ANOMALY_CLASSES
from replog.chaos.runner import run_chaos
from replog.harness.local_cluster import LocalCluster
from replog.harness.tcp_proxy import BLACKHOLE

confluent_kafka = pytest.importorskip("confluent_kafka")

# Seed 61's 18 s schedule pauses a broker for 2 s, blackholes a broker's links to both other brokers for 3 s
# (past replica.lag.time.max.ms), restarts the controller, kills and restarts a broker, and stops the
# controller for 2 s. The whole test stays under 40 s on a loaded 2-core machine.
SHORT_SEED = 61
SHORT_DURATION_S = 18


def assert_clean(report) -> None:
    print(report.format())  # shown by pytest when the test fails: the schedule and every count
    assert report.check.counts == dict.fromkeys(ANOMALY_CLASSES, 0)
    assert report.replica_divergence == []
    assert report.ok, report.problems
    assert report.acknowledged > 0
    assert report.read >= report.acknowledged
    assert report.read_during_faults > 0
    assert report.producer_fatal_errors == []
    assert report.isrs_not_whole == []
    assert report.hw_caught_up_after is not None and report.hw_caught_up_after <= HW_CATCH_UP_BOUND_S


async def test_a_short_run_with_every_fault_finds_no_anomaly(tmp_path):
    report = await run_chaos(tmp_path, duration=SHORT_DURATION_S, faults=nemesis.FAULTS, seed=SHORT_SEED)
    assert_clean(report)
    assert len(report.performed_at) == len(report.schedule)
    assert len(report.isr_waits) == sum(1 for a in report.schedule if a.starts_fault)
    for op in (nemesis.KILL_BROKER, nemesis.PAUSE_BROKER, nemesis.CUT_NETWORK, nemesis.RESTART_CONTROLLER,
               nemesis.STOP_CONTROLLER):
        assert report.count(op) > 0, op
    written = json.loads((tmp_path / "report.json").read_text())
    assert (written["seed"], written["ok"], written["acknowledged"]) == (SHORT_SEED, True, report.acknowledged)
    history = json.loads((tmp_path / "history.json").read_text())
    assert len(history["acknowledged"]) == report.acknowledged


async def test_a_short_run_over_sasl_ssl_finds_no_anomaly(tmp_path):
    """Every link of the cluster over TLS (clients with SCRAM-SHA-512, replication and the controller's
    requests with the inter-broker login), under the same faults: the proxies carry TLS as they carry TCP."""
    report = await run_chaos(tmp_path, duration=SHORT_DURATION_S, faults=nemesis.FAULTS, seed=SHORT_SEED,
                             security="sasl_ssl")
    assert_clean(report)
    assert report.acknowledged > 0
    assert "(SASL_SSL)" in (tmp_path / "broker-1.out").read_text()


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", [11, 12, 13])
async def test_long_runs_with_every_fault_find_no_anomaly(tmp_path, seed):
    report = await run_chaos(tmp_path, duration=180, faults=nemesis.FAULTS, seed=seed)
    assert_clean(report)
    for op in (nemesis.KILL_BROKER, nemesis.PAUSE_BROKER, nemesis.CUT_NETWORK, nemesis.RESTART_CONTROLLER,
               nemesis.STOP_CONTROLLER):
        assert report.count(op) > 0, op


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("seed", [3, 4])  # 3 found the stalled fetcher (test_found_bugs.py)
async def test_long_runs_with_network_cuts_alone_find_no_anomaly(tmp_path, seed):
    report = await run_chaos(tmp_path, duration=60, faults=(nemesis.PARTITION,), seed=seed)
    assert_clean(report)
    assert report.count(nemesis.CUT_NETWORK) > 0


def keep_producing(bootstrap: str, topic: str, stop: threading.Event) -> None:
    """Writes until stopped: a follower that stops fetching falls behind only while the leader appends."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                                         "log_level": 2})
    while not stop.wait(0.01):
        producer.produce(topic, b"x", partition=0)
        producer.poll(0)
    producer.flush(10)


async def test_a_cut_between_two_brokers_separates_exactly_them(tmp_path):
    """Brokers connect to each other from their own addresses, so the proxies cut exactly the named link:
    the follower cut from its leader leaves the ISR while it still heartbeats, and rejoins once healed."""
    cluster = LocalCluster(tmp_path, broker_proxies=True)
    stop = threading.Event()
    writer: threading.Thread | None = None
    try:
        await cluster.start()
        await cluster.controller.create_topic("cut", {0: [1, 2, 3]}, {"min.insync.replicas": "2"})
        writer = threading.Thread(target=keep_producing, args=(cluster.bootstrap, "cut", stop))
        writer.start()
        await cluster.wait_for_isr("cut", 0, {1, 2, 3})
        cluster.partition(3, [1], mode=BLACKHOLE)
        await cluster.wait_for_isr("cut", 0, {1, 2})
        assert cluster.active_brokers() == {1, 2, 3}  # only the link between brokers 1 and 3 is cut
        cluster.heal_partition(3, [1])
        await cluster.wait_for_isr("cut", 0, {1, 2, 3})
    finally:
        stop.set()
        if writer is not None:
            await asyncio.to_thread(writer.join)
        await cluster.stop()


def test_an_unknown_fault_is_a_usage_error_before_anything_starts(capsys):
    assert cli.main(["chaos", "--nemesis", "kill,flood"]) == cli.EXIT_USAGE
    assert "unknown nemesis ['flood']" in capsys.readouterr().err
