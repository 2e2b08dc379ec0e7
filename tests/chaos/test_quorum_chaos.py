"""The chaos suite with a controller quorum: three controller processes and three brokers, the quorum faults
(the active controller or a standby SIGKILLed, paused, isolated; the active controller killed together with a
broker) under idempotent acks=all load; the checks are the broker chaos run's and must find nothing."""

import pytest

from replog import cli
from replog.chaos import nemesis
from replog.chaos.runner import run_chaos

from .test_chaos import assert_clean

pytest.importorskip("confluent_kafka")

# Seed 48's 13 s schedule with the quorum faults: isolates a standby (refused connections) for 1.2 s, pauses
# the active controller for 1.4 s, SIGKILLs the active controller for 1.7 s, then SIGKILLs the active
# controller and broker 1 together. About 45 s on an idle 2-core machine.
SHORT_SEED = 48
SHORT_DURATION_S = 13


@pytest.mark.timeout(240)
async def test_a_short_run_with_every_quorum_fault_finds_no_anomaly(tmp_path):
    report = await run_chaos(tmp_path, duration=SHORT_DURATION_S, faults=nemesis.QUORUM_FAULTS, seed=SHORT_SEED,
                             controllers=3)
    assert_clean(report)
    assert len(report.performed_at) == len(report.schedule)
    for op in (nemesis.KILL_CONTROLLER, nemesis.PAUSE_CONTROLLER, nemesis.ISOLATE_CONTROLLER,
               nemesis.KILL_CONTROLLER_AND_BROKER):
        assert report.count(op) == 1, op
    assert {a.controller for a in report.schedule if a.controller} == {nemesis.ACTIVE, nemesis.STANDBY}
    assert report.nemesis_errors == []


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("seed", [21, 22])
async def test_long_runs_with_quorum_and_broker_faults_find_no_anomaly(tmp_path, seed):
    report = await run_chaos(tmp_path, duration=180, faults=nemesis.FAULTS + nemesis.QUORUM_FAULTS, seed=seed,
                             controllers=3)
    assert_clean(report)
    for op in (nemesis.KILL_CONTROLLER, nemesis.PAUSE_CONTROLLER, nemesis.ISOLATE_CONTROLLER,
               nemesis.KILL_CONTROLLER_AND_BROKER, nemesis.KILL_BROKER, nemesis.CUT_NETWORK):
        assert report.count(op) > 0, op


@pytest.mark.timeout(240)
async def test_a_short_run_over_sasl_ssl_with_every_quorum_fault_finds_no_anomaly(tmp_path):
    """The same faults on a secured quorum: TLS on the controllers' listeners too, each node logging in as
    itself (no shared secret), the controllers re-electing and the brokers re-registering over TLS."""
    report = await run_chaos(tmp_path, duration=SHORT_DURATION_S, faults=nemesis.QUORUM_FAULTS, seed=SHORT_SEED,
                             controllers=3, security="sasl_ssl")
    assert_clean(report)
    assert report.nemesis_errors == []
    assert "(SASL_SSL)" in (tmp_path / "broker-1.out").read_text()


def test_quorum_faults_without_a_quorum_are_refused_by_the_command(capsys):
    assert cli.main(["chaos", "--nemesis", "controller-kill", "--duration", "5"]) == cli.EXIT_USAGE
    assert "controller-kill needs --controllers 3 or more" in capsys.readouterr().err
