"""The chaos suite's nemesis schedule: reproducible from its seed, one broker down at most, always healed."""

import pytest

from replog.chaos.nemesis import (
    CONTROLLER,
    FAULTS,
    HEALS,
    KILL,
    KILL_BROKER,
    PAUSE,
    PAUSE_BROKER,
    RESTART_CONTROLLER,
    parse_faults,
    schedule,
)

BROKERS = (1, 2, 3)
SEEDS = range(50)


def test_the_same_seed_gives_the_same_schedule():
    assert schedule(7, 60, FAULTS, BROKERS) == schedule(7, 60, FAULTS, BROKERS)
    assert schedule(7, 60, {"pause", "kill", "controller"}, BROKERS) == schedule(7, 60, FAULTS, BROKERS)
    assert schedule(7, 60, FAULTS, BROKERS) != schedule(8, 60, FAULTS, BROKERS)


@pytest.mark.parametrize("seed", SEEDS)
def test_at_most_one_broker_is_down_and_every_fault_is_healed_within_the_duration(seed):
    down: dict[int, str] = {}  # broker -> the action that took it down
    previous_at = 0.0
    actions = schedule(seed, 60, FAULTS, BROKERS)
    for action in actions:
        assert previous_at <= action.at <= 60
        previous_at = action.at
        if action.op in HEALS:
            assert not down, f"{action} while {down} is down"
            down[action.broker] = action.op
        elif action.op != RESTART_CONTROLLER:
            assert HEALS[down.pop(action.broker)] == action.op, action
    assert not down, f"never healed: {down}"


def test_a_long_schedule_uses_every_fault_and_every_broker():
    actions = schedule(1, 120, FAULTS, BROKERS)
    assert {a.op for a in actions} >= {KILL_BROKER, PAUSE_BROKER, RESTART_CONTROLLER}
    assert {a.broker for a in actions if a.broker is not None} == set(BROKERS)


def test_only_the_enabled_faults_happen():
    assert {a.op for a in schedule(3, 60, [KILL], BROKERS)} == {"kill", "start"}
    assert {a.op for a in schedule(3, 60, [PAUSE], BROKERS)} == {"pause", "resume"}
    assert {a.op for a in schedule(3, 60, [CONTROLLER], BROKERS)} == {RESTART_CONTROLLER}
    assert schedule(3, 60, [], BROKERS) == []


def test_a_schedule_shorter_than_the_warm_up_is_empty():
    assert schedule(3, 1, FAULTS, BROKERS) == []


def test_faults_are_parsed_from_a_comma_separated_list():
    assert parse_faults("kill, pause") == ("kill", "pause")
    with pytest.raises(ValueError, match="partition"):
        parse_faults("kill,partition")
    with pytest.raises(ValueError):
        parse_faults("")
