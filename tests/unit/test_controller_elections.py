"""ElectLeaders decisions (KIP-460): preferred and unclean, with Kafka's per-partition answers."""

import dataclasses

from kio.schema.errors import ErrorCode

from replog.controller.cluster import BrokerRegistration, ClusterMetadata
from replog.controller.elections import ElectionType, decide_elections
from replog.controller.registry import NO_LEADER, LeaderRecoveryState


def cluster(*fenced: int) -> ClusterMetadata:
    metadata = ClusterMetadata()
    for b in (1, 2, 3):
        metadata.add_broker(BrokerRegistration(b, "127.0.0.1", 9000 + b, fenced=b in fenced))
    metadata.create_topic("t", {0: (1, 2, 3), 1: (2, 3, 1)}, {})
    return metadata


def test_preferred_election_moves_drifted_leadership_back():
    metadata = cluster()
    metadata.elect_leader("t", 0, 2)  # drifted away from preferred replica 1
    answers, changes = decide_elections(metadata, ElectionType.PREFERRED, [("t", 0), ("t", 1), ("t", 7)])
    assert answers == {("t", 0): (ErrorCode.none, None),
                       ("t", 1): (ErrorCode.election_not_needed, "Leader election not needed for topic partition."),
                       ("t", 7): (ErrorCode.unknown_topic_or_partition, "no partition t-7")}
    assert [(c.partition, c.leader) for c in changes] == [(0, 1)]
    assert changes[0].leader_epoch == metadata.registration("t", 0).leader_epoch + 1


def test_preferred_election_of_every_partition_lists_only_those_that_needed_one():
    metadata = cluster()
    metadata.elect_leader("t", 0, 3)
    answers, changes = decide_elections(metadata, ElectionType.PREFERRED, None)
    assert answers == {("t", 0): (ErrorCode.none, None)}
    assert len(changes) == 1


def test_preferred_replica_out_of_the_isr_is_not_available():
    metadata = cluster()
    metadata.elect_leader("t", 0, 2, isr=(2, 3))
    answers, changes = decide_elections(metadata, ElectionType.PREFERRED, [("t", 0)])
    assert answers[("t", 0)][0] == ErrorCode.preferred_leader_not_available
    assert changes == []


def test_unclean_election_only_for_leaderless_partitions():
    metadata = cluster(2, 3)  # only broker 1 is live
    current = metadata.registration("t", 1)
    # Partition 1 lost its leader with ISR {2}: only an unclean election brings it back, on broker 1.
    metadata.topics["t"].partitions[1] = dataclasses.replace(current, leader=NO_LEADER, isr=(2,),
                                                             leader_epoch=current.leader_epoch + 1,
                                                             partition_epoch=current.partition_epoch + 1)
    answers, changes = decide_elections(metadata, ElectionType.UNCLEAN, [("t", 0), ("t", 1)])
    assert answers[("t", 0)][0] == ErrorCode.election_not_needed
    assert answers[("t", 1)] == (ErrorCode.none, None)
    assert [(c.partition, c.leader, c.isr) for c in changes] == [(1, 1, (1,))]
    assert changes[0].leader_recovery_state is LeaderRecoveryState.RECOVERING


def test_unclean_election_without_a_live_replica():
    metadata = cluster(1, 2, 3)
    current = metadata.registration("t", 0)
    metadata.topics["t"].partitions[0] = dataclasses.replace(current, leader=NO_LEADER, isr=(1,),
                                                             leader_epoch=current.leader_epoch + 1,
                                                             partition_epoch=current.partition_epoch + 1)
    answers, changes = decide_elections(metadata, ElectionType.UNCLEAN, [("t", 0)])
    assert answers[("t", 0)][0] == ErrorCode.eligible_leaders_not_available
    assert changes == []
