"""The leader selectors of seed 000 (section 1.1) and seed 001 (PartitionLeaderElectionAlgorithms), case by
case: who leads next and with which ISR, or why nobody can."""

import pytest

from replog.controller.selectors import (
    Elected,
    ElectionNotNeeded,
    NoLeaderAvailable,
    controlled_shutdown_leader,
    initial_leader,
    offline_leader,
    preferred_leader,
    reassigned_leader,
)

NONE = NoLeaderAvailable  # the expected type; the reason is free text


def check(result, expected) -> None:
    if expected is NONE:
        assert isinstance(result, NoLeaderAvailable), result
        assert result.reason
    else:
        assert result == expected


# (case, assignment, live brokers, expected)
INITIAL = [
    ("all live: the first replica leads, all are in sync", [1, 2, 3], {1, 2, 3}, Elected(1, (1, 2, 3))),
    ("first replica dead", [1, 2, 3], {2, 3}, Elected(2, (2, 3))),
    ("the ISR keeps assignment order", [3, 1, 2], {1, 2, 3}, Elected(3, (3, 1, 2))),
    ("only the last replica live", [1, 2, 3], {3, 7}, Elected(3, (3,))),
    ("all dead", [1, 2, 3], {4}, NONE),
]


@pytest.mark.parametrize(("assignment", "live", "expected"), [c[1:] for c in INITIAL],
                         ids=[c[0] for c in INITIAL])
def test_initial_leader(assignment, live, expected):
    check(initial_leader(assignment, live), expected)


# (case, assignment, ISR, live brokers, unclean election enabled, expected)
OFFLINE = [
    ("first live ISR member in assignment order leads", [1, 2, 3], [3, 2], {2, 3}, False, Elected(2, (3, 2))),
    ("assignment order, not ISR order", [3, 2, 1], [1, 2, 3], {1, 2, 3}, False, Elected(3, (1, 2, 3))),
    ("dead ISR members leave the ISR", [1, 2, 3], [1, 2, 3], {2}, False, Elected(2, (2,))),
    ("a live replica outside the ISR is skipped", [1, 2, 3], [1, 3], {2, 3}, False, Elected(3, (3,))),
    ("live replicas, none in the ISR, clean only", [1, 2, 3], [1], {2, 3}, False, NONE),
    ("live replicas, none in the ISR, unclean", [1, 2, 3], [1], {2, 3}, True, Elected(2, (2,), unclean=True)),
    ("unclean takes assignment order", [3, 2, 1], [1], {2, 3}, True, Elected(3, (3,), unclean=True)),
    ("a clean choice wins even when unclean is enabled", [1, 2, 3], [3], {2, 3}, True, Elected(3, (3,))),
    ("empty ISR, clean only", [1, 2, 3], [], {1, 2, 3}, False, NONE),
    ("empty ISR, unclean", [1, 2, 3], [], {2, 3}, True, Elected(2, (2,), unclean=True)),
    ("all dead, clean only", [1, 2, 3], [1, 2, 3], set(), False, NONE),
    ("all dead, unclean", [1, 2, 3], [1, 2, 3], {4, 5}, True, NONE),
    ("the old leader came back", [1, 2], [1], {1, 2}, False, Elected(1, (1,))),
    # Seed 000, broker failover 3.2: the surviving ISR members form the new ISR.
    ("broker failover keeps surviving ISR members", [1, 2, 3, 4], [4, 1, 3], {2, 3, 4}, False,
     Elected(3, (4, 3))),
]


@pytest.mark.parametrize(("assignment", "isr", "live", "unclean", "expected"), [c[1:] for c in OFFLINE],
                         ids=[c[0] for c in OFFLINE])
def test_offline_leader(assignment, isr, live, unclean, expected):
    check(offline_leader(assignment, isr, live, unclean_election_enabled=unclean), expected)


# (case, target replicas, ISR, live brokers, expected)
REASSIGNED = [
    # Seed 000's reassignment table, step 7: OAR {1,2,3}, RAR {4,5,6}, all caught up -> 4/{1,2,3,4,5,6}.
    ("seed 000 step 7", [4, 5, 6], [1, 2, 3, 4, 5, 6], {1, 2, 3, 4, 5, 6}, Elected(4, (1, 2, 3, 4, 5, 6))),
    ("first target replica dead", [4, 5, 6], [1, 2, 3, 4, 5, 6], {1, 2, 3, 5, 6},
     Elected(5, (1, 2, 3, 4, 5, 6))),
    ("first target replica not caught up", [4, 5, 6], [1, 2, 3, 5, 6], {1, 2, 3, 4, 5, 6},
     Elected(5, (1, 2, 3, 5, 6))),
    ("target order, not ISR order", [6, 5, 4], [4, 5, 6], {4, 5, 6}, Elected(6, (4, 5, 6))),
    ("an overlapping target may keep the leader", [1, 4], [1, 2, 4], {1, 2, 4}, Elected(1, (1, 2, 4))),
    ("no target replica in the ISR", [4, 5, 6], [1, 2, 3], {1, 2, 3, 4, 5, 6}, NONE),
    ("target replicas in the ISR are dead", [4, 5], [1, 4, 5], {1}, NONE),
    ("empty ISR", [4, 5], [], {4, 5}, NONE),
]


@pytest.mark.parametrize(("target", "isr", "live", "expected"), [c[1:] for c in REASSIGNED],
                         ids=[c[0] for c in REASSIGNED])
def test_reassigned_leader(target, isr, live, expected):
    check(reassigned_leader(target, isr, live), expected)


# (case, assignment, ISR, live brokers, current leader, expected)
PREFERRED = [
    ("preferred replica live and in sync", [1, 2, 3], [2, 3, 1], {1, 2, 3}, 2, Elected(1, (2, 3, 1))),
    ("the ISR is unchanged, dead members too", [1, 2, 3], [1, 2, 3], {1, 2}, 2, Elected(1, (1, 2, 3))),
    ("leader already preferred", [1, 2, 3], [1, 2, 3], {1, 2, 3}, 1, ElectionNotNeeded(1)),
    ("preferred replica dead", [1, 2, 3], [1, 2, 3], {2, 3}, 2, NONE),
    ("preferred replica out of sync", [1, 2, 3], [2, 3], {1, 2, 3}, 2, NONE),
    ("only the first replica counts, not the first live one", [1, 2, 3], [2, 3], {2, 3}, 3, NONE),
    ("preferred leader died: not available, not 'not needed'", [1, 2], [1, 2], {2}, 1, NONE),
    ("empty ISR", [1, 2], [], {1, 2}, -1, NONE),
]


@pytest.mark.parametrize(("assignment", "isr", "live", "current_leader", "expected"),
                         [c[1:] for c in PREFERRED], ids=[c[0] for c in PREFERRED])
def test_preferred_leader(assignment, isr, live, current_leader, expected):
    check(preferred_leader(assignment, isr, live, current_leader=current_leader), expected)


# (case, assignment, ISR, live brokers, shutting down, expected)
CONTROLLED_SHUTDOWN = [
    ("leader shuts down: next ISR member leads", [1, 2, 3], [1, 2, 3], {1, 2, 3}, {1}, Elected(2, (2, 3))),
    ("assignment order, not ISR order", [1, 3, 2], [2, 1, 3], {1, 2, 3}, {1}, Elected(3, (2, 3))),
    ("a replica outside the ISR may not lead", [1, 2, 3], [1, 3], {1, 2, 3}, {1}, Elected(3, (3,))),
    ("a dead ISR member may not lead but stays in the ISR", [1, 2, 3], [1, 2, 3], {1, 3}, {1},
     Elected(3, (2, 3))),
    ("several brokers shutting down", [1, 2, 3], [1, 2, 3], {1, 2, 3}, {1, 2}, Elected(3, (3,))),
    ("a follower shutting down leaves the ISR", [1, 2, 3], [1, 2, 3], {1, 2, 3}, {3}, Elected(1, (1, 2))),
    ("the only ISR member shuts down", [1, 2, 3], [1], {1, 2, 3}, {1}, NONE),
    ("every live ISR member shuts down", [1, 2, 3], [1, 2], {1, 2}, {1, 2}, NONE),
    ("remaining ISR member dead", [1, 2], [1, 2], {1}, {1}, NONE),
    ("empty ISR", [1, 2], [], {1, 2}, {1}, NONE),
]


@pytest.mark.parametrize(("assignment", "isr", "live", "shutting_down", "expected"),
                         [c[1:] for c in CONTROLLED_SHUTDOWN], ids=[c[0] for c in CONTROLLED_SHUTDOWN])
def test_controlled_shutdown_leader(assignment, isr, live, shutting_down, expected):
    check(controlled_shutdown_leader(assignment, isr, live, shutting_down), expected)


def test_an_election_keeps_the_leader_in_the_isr():
    with pytest.raises(AssertionError):
        Elected(1, (2, 3))
    with pytest.raises(AssertionError):
        Elected(1, (1, 2), unclean=True)  # an unclean leader starts alone


def test_selectors_reject_an_isr_outside_the_assignment():
    with pytest.raises(AssertionError):
        offline_leader([1, 2], [1, 5], {1, 2}, unclean_election_enabled=False)
    with pytest.raises(AssertionError):
        preferred_leader([1, 2], [2, 2], {1, 2}, current_leader=2)
