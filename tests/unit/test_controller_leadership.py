"""What happens to partitions when a broker leaves or comes back (controller/leadership.py), as tables:
a partition before, who is eligible, whether unclean election is allowed, and the partition after."""

import uuid

import pytest

from replog.controller.leadership import elect_offline_partitions, preferred_leader_elections, without_broker
from replog.controller.registry import NO_LEADER, LeaderRecoveryState, PartitionRegistration

TOPIC_ID = uuid.UUID(int=9)
RECOVERED, RECOVERING = LeaderRecoveryState.RECOVERED, LeaderRecoveryState.RECOVERING


def partition(replicas, isr, leader, *, leader_epoch: int = 3, partition_epoch: int = 5, topic: str = "t",
              index: int = 0, recovery=RECOVERED) -> PartitionRegistration:
    return PartitionRegistration(topic, TOPIC_ID, index, tuple(replicas), tuple(isr), leader, leader_epoch,
                                 partition_epoch, recovery)


def summary(p: PartitionRegistration) -> tuple:
    return p.leader, p.isr, p.leader_epoch, p.partition_epoch, p.leader_recovery_state


NEVER = frozenset()
# (case, partition before, eligible brokers (never the leaving one), unclean allowed,
#  (leader, ISR, leader epoch, partition epoch, recovery state) after, or None when unchanged).
# Broker 1 leaves in every case.
WITHOUT_BROKER_1 = [
    ("not a replica", partition([2, 3], [2, 3], 2), {2, 3}, False, None),
    ("replica out of the ISR", partition([2, 1, 3], [2, 3], 2), {2, 3}, False, None),
    ("follower: out of the ISR, leader epoch kept", partition([2, 1, 3], [2, 1, 3], 2), {2, 3}, False,
     (2, (2, 3), 3, 6, RECOVERED)),
    ("leader: the next replica in assignment order in the ISR", partition([1, 3, 2], [2, 1, 3], 1), {2, 3},
     False, (3, (2, 3), 4, 6, RECOVERED)),
    ("leader: an ineligible replica is skipped", partition([1, 3, 2], [1, 2, 3], 1), {2}, False,
     (2, (2,), 4, 6, RECOVERED)),
    ("leader: an eligible replica out of the ISR is not clean", partition([1, 2, 3], [1, 3], 1), {2, 3}, False,
     (3, (3,), 4, 6, RECOVERED)),
    ("last ISR member leads: leaderless, it stays in the ISR", partition([1, 2, 3], [1], 1), {2, 3}, False,
     (NO_LEADER, (1,), 4, 6, RECOVERED)),
    ("last ISR member, unclean allowed: the first eligible replica leads alone, recovering",
     partition([1, 3, 2], [1], 1), {2, 3}, True, (3, (3,), 4, 6, RECOVERING)),
    ("last ISR member, unclean allowed, nobody eligible", partition([1, 2], [1], 1), NEVER, True,
     (NO_LEADER, (1,), 4, 6, RECOVERED)),
    ("leader, no ISR member eligible: leaderless with the others", partition([1, 2, 3], [1, 2, 3], 1), NEVER,
     False, (NO_LEADER, (2, 3), 4, 6, RECOVERED)),
    ("leaderless, last ISR member: nothing to change", partition([1, 2], [1], NO_LEADER), {2}, False, None),
    ("leaderless, one of several ISR members", partition([1, 2], [1, 2], NO_LEADER), NEVER, False,
     (NO_LEADER, (2,), 3, 6, RECOVERED)),
    ("recovering follower leaves: still recovering", partition([2, 1], [2, 1], 2, recovery=RECOVERING), {2},
     False, (2, (2,), 3, 6, RECOVERING)),
]


@pytest.mark.parametrize(("before", "eligible", "unclean", "after"), [c[1:] for c in WITHOUT_BROKER_1],
                         ids=[c[0] for c in WITHOUT_BROKER_1])
def test_without_broker(before, eligible, unclean, after):
    changes = without_broker([before], 1, eligible, lambda topic: unclean)
    if after is None:
        assert changes == []
    else:
        (changed,) = changes
        assert summary(changed) == after
        assert (changed.replicas, changed.topic_id, changed.partition) == (before.replicas, TOPIC_ID, 0)


def test_without_broker_asks_each_topic_about_unclean_election():
    dirty = partition([1, 2], [1], 1, topic="dirty")
    clean = partition([1, 2], [1], 1, topic="clean")
    asked = []

    def unclean_allowed(topic: str) -> bool:
        asked.append(topic)
        return topic == "dirty"

    changes = without_broker([dirty, clean, partition([2, 3], [2, 3], 2, topic="other")], 1, {2},
                             unclean_allowed)
    assert [(c.topic, c.leader) for c in changes] == [("dirty", 2), ("clean", NO_LEADER)]
    assert sorted(asked) == ["clean", "dirty"]  # only partitions the broker led needed an election


def test_without_broker_refuses_an_eligible_leaving_broker():
    with pytest.raises(AssertionError):
        without_broker([partition([1, 2], [1, 2], 1)], 1, {1, 2}, lambda topic: False)


# (case, partition before, eligible brokers, unclean allowed, after as above, or None when unchanged)
ELECT_OFFLINE = [
    ("has a leader", partition([1, 2], [1, 2], 2), {1, 2}, True, None),
    ("its ISR member is back", partition([1, 2], [1], NO_LEADER), {1, 2}, False, (1, (1,), 4, 6, RECOVERED)),
    ("ISR member still away", partition([1, 2], [1], NO_LEADER), {2}, False, None),
    ("ISR member away, unclean allowed", partition([1, 2], [1], NO_LEADER), {2}, True,
     (2, (2,), 4, 6, RECOVERING)),
    ("nobody eligible, unclean allowed", partition([1, 2], [1], NO_LEADER), NEVER, True, None),
    ("first eligible ISR member in assignment order", partition([3, 2, 1], [1, 2], NO_LEADER), {1, 2}, False,
     (2, (1, 2), 4, 6, RECOVERED)),
    ("ineligible ISR members leave the ISR", partition([1, 2], [1, 2], NO_LEADER), {2}, False,
     (2, (2,), 4, 6, RECOVERED)),
]


@pytest.mark.parametrize(("before", "eligible", "unclean", "after"), [c[1:] for c in ELECT_OFFLINE],
                         ids=[c[0] for c in ELECT_OFFLINE])
def test_elect_offline_partitions(before, eligible, unclean, after):
    changes = elect_offline_partitions([before], eligible, lambda topic: unclean)
    if after is None:
        assert changes == []
    else:
        (changed,) = changes
        assert summary(changed) == after


def test_elect_offline_partitions_changes_only_those_that_get_a_leader():
    offline = [partition([1, 2], [1], NO_LEADER, index=i) for i in range(3)]
    stuck = partition([3], [3], NO_LEADER, index=3)
    online = partition([2, 1], [2, 1], 2, index=4)
    changes = elect_offline_partitions([*offline, stuck, online], {1, 2}, lambda topic: False)
    assert [(c.partition, c.leader) for c in changes] == [(0, 1), (1, 1), (2, 1)]


# (case, partitions as (replicas, ISR, leader), eligible, imbalance %, the partitions that move to their
#  preferred replica)
REBALANCE = [
    ("balanced", [([1, 2], [1, 2], 1), ([2, 1], [2, 1], 2)], {1, 2}, 10, []),
    ("one of one drifted", [([1, 2], [1, 2], 2)], {1, 2}, 10, [0]),
    ("preferred replica not eligible", [([1, 2], [1, 2], 2)], {2}, 10, []),
    ("preferred replica out of the ISR", [([1, 2], [2], 2)], {1, 2}, 10, []),
    ("drift within the threshold", [([1, 2], [1, 2], 2), ([1, 2], [1, 2], 1)], {1, 2}, 50, []),
    ("drift above the threshold moves every drifted one", [([1, 2], [1, 2], 2), ([1, 2], [1, 2], 1),
                                                            ([1, 3], [1, 3], 3)], {1, 2, 3}, 50, [0, 2]),
    ("a leaderless partition gets its preferred replica", [([1, 2], [1], NO_LEADER)], {1, 2}, 0, [0]),
]


@pytest.mark.parametrize(("layout", "eligible", "percentage", "moved"), [c[1:] for c in REBALANCE],
                         ids=[c[0] for c in REBALANCE])
def test_preferred_leader_elections(layout, eligible, percentage, moved):
    partitions = [partition(replicas, isr, leader, index=i) for i, (replicas, isr, leader) in enumerate(layout)]
    changes = preferred_leader_elections(partitions, eligible, percentage)
    assert [c.partition for c in changes] == moved
    for changed in changes:
        before = partitions[changed.partition]
        assert (changed.leader, changed.isr) == (before.replicas[0], before.isr)
        assert (changed.leader_epoch, changed.partition_epoch) == (before.leader_epoch + 1, before.partition_epoch + 1)
