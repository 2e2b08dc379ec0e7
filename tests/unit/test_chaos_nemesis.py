"""The chaos suite's nemesis schedule: reproducible from its seed, one fault at a time, always healed."""

import pytest

from replog.chaos.nemesis import (
    CONTROLLER,
    CUT_NETWORK,
    FAULTS,
    HEAL_NETWORK,
    HEALS,
    KILL,
    KILL_BROKER,
    PARTITION,
    PAUSE,
    PAUSE_BROKER,
    RESTART_CONTROLLER,
    START_CONTROLLER,
    STOP_CONTROLLER,
    Cut,
    parse_faults,
    schedule,
)
from replog.harness.tcp_proxy import BLACKHOLE, REFUSE

BROKERS = (1, 2, 3)
SEEDS = range(50)


def test_the_same_seed_gives_the_same_schedule():
    assert schedule(7, 60, FAULTS, BROKERS) == schedule(7, 60, FAULTS, BROKERS)
    assert schedule(7, 60, {"pause", "kill", "partition", "controller"}, BROKERS) == schedule(7, 60, FAULTS,
                                                                                             BROKERS)
    assert schedule(7, 60, FAULTS, BROKERS) != schedule(8, 60, FAULTS, BROKERS)


@pytest.mark.parametrize("seed", SEEDS)
def test_one_fault_at_a_time_and_every_fault_is_healed_within_the_duration(seed):
    open_fault = None  # the action that started the fault in progress
    previous_at = 0.0
    for action in schedule(seed, 60, FAULTS, BROKERS):
        assert previous_at <= action.at <= 60
        previous_at = action.at
        if action.starts_fault:
            assert open_fault is None, f"{action} while {open_fault} lasts"
            if action.op != RESTART_CONTROLLER:
                open_fault = action
        else:
            assert open_fault is not None, f"{action} heals nothing"
            assert (HEALS[open_fault.op], open_fault.broker, open_fault.cut) == (action.op, action.broker,
                                                                                 action.cut), action
            open_fault = None
    assert open_fault is None, f"never healed: {open_fault}"


@pytest.mark.parametrize("seed", SEEDS)
def test_a_cut_names_only_other_brokers_and_leaves_the_cluster_a_majority(seed):
    for action in schedule(seed, 60, [PARTITION], BROKERS):
        cut = action.cut
        assert action.op in (CUT_NETWORK, HEAL_NETWORK) and cut is not None
        assert action.broker not in cut.peers and set(cut.peers) <= set(BROKERS)
        assert cut.peers or cut.controller, f"{action} cuts nothing"
        # The two brokers a cut separates still reach the third one, or one broker is cut from both.
        assert len(cut.peers) in (0, 1, len(BROKERS) - 1)


def test_a_long_schedule_uses_every_fault_shape_and_every_broker():
    actions = schedule(1, 600, FAULTS, BROKERS)
    assert {a.op for a in actions} >= {KILL_BROKER, PAUSE_BROKER, CUT_NETWORK, RESTART_CONTROLLER,
                                       STOP_CONTROLLER}
    assert {a.broker for a in actions if a.broker is not None} == set(BROKERS)
    cuts = {a.cut for a in actions if a.op == CUT_NETWORK}
    assert {c.mode for c in cuts} == {REFUSE, BLACKHOLE}
    assert {(len(c.peers), c.controller, c.clients) for c in cuts} == {(2, False, False), (2, True, True),
                                                                       (0, True, False), (1, False, False)}


def test_only_the_enabled_faults_happen():
    assert {a.op for a in schedule(3, 60, [KILL], BROKERS)} == {"kill", "start"}
    assert {a.op for a in schedule(3, 60, [PAUSE], BROKERS)} == {"pause", "resume"}
    assert {a.op for a in schedule(3, 60, [PARTITION], BROKERS)} == {"cut", "heal"}
    assert {a.op for a in schedule(3, 60, [CONTROLLER], BROKERS)} == {RESTART_CONTROLLER, STOP_CONTROLLER,
                                                                     START_CONTROLLER}
    assert schedule(3, 60, [], BROKERS) == []


def test_a_schedule_shorter_than_the_warm_up_is_empty():
    assert schedule(3, 1, FAULTS, BROKERS) == []


def test_an_action_describes_its_cut():
    action = schedule(1, 300, [PARTITION], BROKERS)[0]
    assert str(action.cut) in str(action)
    assert str(Cut((2, 3), controller=True, clients=True, mode=BLACKHOLE)) == (
        "from brokers 2,3 and the controller and clients (blackhole)")


def test_faults_are_parsed_from_a_comma_separated_list():
    assert parse_faults("kill, partition") == ("kill", "partition")
    with pytest.raises(ValueError, match="flood"):
        parse_faults("kill,flood")
    with pytest.raises(ValueError):
        parse_faults("")
