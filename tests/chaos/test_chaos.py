"""The chaos suite against a real local cluster: faults from a seeded nemesis under idempotent acks=all load,
then the queue checker and the replica comparison must find nothing. The short run is part of every test
run; the long ones (several seeds, minutes each) are marked slow."""

import pytest

from replog import cli
from replog.chaos import nemesis
from replog.chaos.checker import ANOMALY_CLASSES
from replog.chaos.runner import run_chaos

pytest.importorskip("confluent_kafka")

# Seed 5's 20 s schedule pauses a broker within its session, pauses another one for longer than the session
# timeout (the controller fences it; it must come back after SIGCONT), kills and restarts a broker, and
# restarts the controller.
SHORT_SEED = 5
SHORT_DURATION_S = 20


def assert_clean(report) -> None:
    print(report.format())  # shown by pytest when the test fails: the schedule and every count
    assert report.check.counts == dict.fromkeys(ANOMALY_CLASSES, 0)
    assert report.replica_divergence == []
    assert report.ok, report.problems
    assert report.acknowledged > 0
    assert report.read >= report.acknowledged
    assert report.producer_fatal_errors == []


async def test_a_short_run_with_every_fault_finds_no_anomaly(tmp_path):
    report = await run_chaos(tmp_path, duration=SHORT_DURATION_S, faults=nemesis.FAULTS, seed=SHORT_SEED)
    assert_clean(report)
    assert len(report.performed_at) == len(report.schedule)
    assert report.count(nemesis.KILL_BROKER) > 0
    assert report.count(nemesis.PAUSE_BROKER) > 0
    assert report.count(nemesis.RESTART_CONTROLLER) > 0


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", [11, 12, 13])
async def test_long_runs_with_every_fault_find_no_anomaly(tmp_path, seed):
    report = await run_chaos(tmp_path, duration=180, faults=nemesis.FAULTS, seed=seed)
    assert_clean(report)
    assert report.count(nemesis.KILL_BROKER) > 0
    assert report.count(nemesis.PAUSE_BROKER) > 0


def test_an_unknown_fault_is_a_usage_error_before_anything_starts(capsys):
    assert cli.main(["chaos", "--nemesis", "kill,partition"]) == cli.EXIT_USAGE
    assert "unknown nemesis ['partition']" in capsys.readouterr().err
