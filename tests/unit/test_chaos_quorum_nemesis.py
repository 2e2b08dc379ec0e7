"""The quorum faults of the chaos schedule: seeded, one at a time, each healed by its own end, on the active
controller or a standby, and refused without a quorum to survive them."""

import pytest

from replog.chaos.nemesis import (
    ACTIVE,
    FAULTS,
    HEALS,
    ISOLATE_CONTROLLER,
    KILL_CONTROLLER,
    KILL_CONTROLLER_AND_BROKER,
    PAUSE_CONTROLLER,
    QUORUM_FAULTS,
    STANDBY,
    check_quorum_faults,
    parse_faults,
    schedule,
)
from replog.harness.tcp_proxy import CUT_MODES

BROKERS = (1, 2, 3)
QUORUM_STARTS = {KILL_CONTROLLER, PAUSE_CONTROLLER, ISOLATE_CONTROLLER, KILL_CONTROLLER_AND_BROKER}


@pytest.mark.parametrize("seed", range(50))
def test_quorum_faults_come_one_at_a_time_and_each_is_healed_by_its_own_end(seed):
    open_fault = None
    for action in schedule(seed, 60, FAULTS + QUORUM_FAULTS, BROKERS):
        assert action.at <= 60
        if action.starts_fault:
            assert open_fault is None, f"{action} while {open_fault} lasts"
            open_fault = None if action.op == "restart-controller" else action
        else:
            assert open_fault is not None and HEALS[open_fault.op] == action.op, action
            assert action.broker == open_fault.broker
            open_fault = None
        if action.op in QUORUM_STARTS:
            assert action.controller in (ACTIVE, STANDBY)
            assert (action.mode in CUT_MODES) == (action.op == ISOLATE_CONTROLLER)
            assert (action.broker in BROKERS) == (action.op == KILL_CONTROLLER_AND_BROKER)
    assert open_fault is None


def test_a_long_schedule_hits_the_active_controller_and_standbys_in_every_way():
    actions = [a for a in schedule(2, 600, QUORUM_FAULTS, BROKERS) if a.starts_fault]
    assert {a.op for a in actions} == QUORUM_STARTS
    assert {(a.op, a.controller) for a in actions if a.op != KILL_CONTROLLER_AND_BROKER} == {
        (op, target) for op in QUORUM_STARTS - {KILL_CONTROLLER_AND_BROKER} for target in (ACTIVE, STANDBY)}
    assert {a.controller for a in actions if a.op == KILL_CONTROLLER_AND_BROKER} == {ACTIVE}
    assert {a.mode for a in actions if a.op == ISOLATE_CONTROLLER} == set(CUT_MODES)


def test_quorum_faults_are_named_and_need_three_controllers():
    assert parse_faults("controller-kill,kill") == ("controller-kill", "kill")
    check_quorum_faults(QUORUM_FAULTS, 3)
    check_quorum_faults(FAULTS, 1)  # the others need no quorum
    with pytest.raises(ValueError, match="controller-pause needs --controllers 3 or more"):
        check_quorum_faults(("kill", "controller-pause"), 1)
