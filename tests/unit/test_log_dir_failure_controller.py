"""The controller's side of a failed log dir (KIP-112, with KIP-858's heartbeat field): a broker reports
offline dirs in its heartbeat, the controller asks it which replicas are there (a LeaderAndIsr answered
KAFKA_STORAGE_ERROR for those), and treats those replicas as if their broker had left: out of the ISR,
leadership moved, listed offline in metadata, never elected, until the broker registers again. Fake brokers
on the real protocol, a fake clock; the leadership rules also on their own."""

import dataclasses
import uuid

from kio.schema.errors import ErrorCode

from replog.controller.leadership import elect_offline_partitions, preferred_leader_elections, without_broker
from replog.controller.registry import NO_LEADER, new_partition
from replog.controller.server import ClusterController
from replog.controller.state_machines import PartitionReplica, ReplicaState
from replog.log.partition_log import TopicPartition
from replog.protocol.apis import ApiKey

from .controller_fixtures import (  # noqa: F401  (fixtures)
    LAI,
    UM,
    alter_partition_request,
    brokers,
    clock,
    controller,
    controllers,
    decoded,
    epoch_of,
    forget_requests,
    heartbeat,
    join,
    partition_states,
)

DIR_ID = uuid.uuid4()
TOPIC_ID = uuid.uuid4()


def report_offline_dirs(controller: ClusterController, broker_id: int, *dir_ids: uuid.UUID) -> None:
    answer = controller.broker_heartbeat(broker_id, epoch_of(controller, broker_id), want_fence=False,
                                         want_shutdown=False, offline_log_dirs=dir_ids)
    assert not answer.is_fenced


def offline_replicas_in_last_metadata(fake, topic: str, index: int) -> list[int]:
    """As the broker's metadata says after every UpdateMetadata so far (the later ones carry changes only)."""
    return fake.image.topics[topic].partitions[index].offline_replicas


# ------------------------------------------------------------------------------------------- controller


async def test_replicas_in_a_reported_dir_go_offline_and_lose_their_leaderships(controller, brokers):
    await controller.create_topic("t", {0: [1, 2, 3], 1: [1, 2, 3], 2: [2, 1, 3]})
    await controller.settle()
    brokers[1].partition_error[("t", 0)] = ErrorCode.kafka_storage_error
    brokers[1].partition_error[("t", 2)] = ErrorCode.kafka_storage_error
    forget_requests(brokers)

    report_offline_dirs(controller, 1, DIR_ID)
    await controller.settle()

    # Broker 1 was asked about every replica it has, in one LeaderAndIsr.
    (probe,) = brokers[1].requests(LAI)
    assert set(partition_states(probe)) == {("t", 0), ("t", 1), ("t", 2)}
    # t-0, which it led, has a new leader from the ISR without it; t-2 lost it as a follower.
    moved = controller.registration("t", 0)
    assert (moved.leader, moved.isr, moved.leader_epoch) == (2, (2, 3), 1)
    assert controller.registration("t", 2).isr == (2, 3)
    assert controller.registration("t", 2).leader_epoch == 0
    # t-1, on a healthy dir, is untouched.
    assert controller.registration("t", 1).leader == 1 and controller.registration("t", 1).isr == (1, 2, 3)
    states = controller.states.replicas
    assert states.state(PartitionReplica(TopicPartition("t", 0), 1)) is ReplicaState.OFFLINE
    assert states.state(PartitionReplica(TopicPartition("t", 1), 1)) is ReplicaState.ONLINE
    # Every broker's metadata lists the offline replicas; the new leaders were told, broker 1 was not.
    for fake in brokers.values():
        assert offline_replicas_in_last_metadata(fake, "t", 0) == [1]
        assert offline_replicas_in_last_metadata(fake, "t", 1) == []
    assert ("t", 0) in partition_states(brokers[2].requests(LAI)[-1])
    assert len(brokers[1].requests(LAI)) == 1


async def test_the_same_offline_dirs_again_ask_nothing(controller, brokers):
    await controller.create_topic("t", {0: [1, 2]})
    brokers[1].partition_error[("t", 0)] = ErrorCode.kafka_storage_error
    report_offline_dirs(controller, 1, DIR_ID)
    await controller.settle()
    forget_requests(brokers)
    report_offline_dirs(controller, 1, DIR_ID)
    heartbeat(controller, 1)  # a heartbeat without the field (v0) forgets nothing either
    await controller.settle()
    assert brokers[1].requests(LAI) == []
    assert controller.metadata.offline_replicas_of(controller.registration("t", 0)) == {1}


async def test_the_last_isr_member_offline_leaves_the_partition_leaderless_not_unclean(controller, brokers):
    await controller.create_topic("t", {0: [1, 2]})
    controller.metadata.set_isr("t", 0, [1])  # broker 2 fell behind
    brokers[1].partition_error[("t", 0)] = ErrorCode.kafka_storage_error
    report_offline_dirs(controller, 1, DIR_ID)
    await controller.settle()
    offline = controller.registration("t", 0)
    assert (offline.leader, offline.isr) == (NO_LEADER, (1,))


async def test_a_registration_brings_the_replicas_back(controller, brokers):
    await controller.create_topic("t", {0: [1, 2]})
    brokers[1].partition_error[("t", 0)] = ErrorCode.kafka_storage_error
    report_offline_dirs(controller, 1, DIR_ID)
    await controller.settle()
    assert controller.registration("t", 0).leader == 2

    del brokers[1].partition_error[("t", 0)]
    assert heartbeat(controller, 1, want_shutdown=True).should_shut_down  # it leads nothing now
    join(controller, brokers[1])  # the broker restarted: a new process, its dirs online again
    await controller.settle()
    assert controller.metadata.offline_replicas_of(controller.registration("t", 0)) == set()
    assert offline_replicas_in_last_metadata(brokers[2], "t", 0) == []
    # It is a replica like any other again: a later report of the same dir id is news.
    brokers[1].partition_error[("t", 0)] = ErrorCode.kafka_storage_error
    forget_requests(brokers)
    report_offline_dirs(controller, 1, DIR_ID)
    await controller.settle()
    assert len(brokers[1].requests(LAI)) == 1


async def test_an_offline_replica_is_never_elected(controller, brokers):
    await controller.create_topic("t", {0: [1, 2]})
    controller.metadata.set_isr("t", 0, [1])
    brokers[1].partition_error[("t", 0)] = ErrorCode.kafka_storage_error
    report_offline_dirs(controller, 1, DIR_ID)
    await controller.settle()
    # Another broker coming back makes leaderless partitions try an election: broker 1 is still offline here.
    heartbeat(controller, 2, want_fence=True)
    heartbeat(controller, 2)
    await controller.settle()
    assert controller.registration("t", 0).leader == NO_LEADER
    assert controller.rebalance_leaders() == 0
    # Nor does broker 1 coming back from a fencing (the same process: its dir is still offline).
    heartbeat(controller, 1, want_fence=True)
    heartbeat(controller, 1)
    await controller.settle()
    assert controller.registration("t", 0).leader == NO_LEADER
    assert controller.states.replicas.state(PartitionReplica(TopicPartition("t", 0), 1)) is ReplicaState.OFFLINE


async def test_an_offline_replica_cannot_rejoin_the_isr(controller, brokers):
    # The leader may think it caught up: a fetch it sent before its dir failed was answered afterwards.
    topic = await controller.create_topic("t", {0: [2, 1]})
    brokers[1].partition_error[("t", 0)] = ErrorCode.kafka_storage_error
    report_offline_dirs(controller, 1, DIR_ID)
    await controller.settle()
    shrunk = controller.registration("t", 0)
    assert shrunk.isr == (2,)
    response = controller.alter_partition(decoded(ApiKey.ALTER_PARTITION, 2, alter_partition_request(
        topic.topic_id, 0, [2, 1], broker_id=2, broker_epoch=epoch_of(controller, 2),
        partition_epoch=shrunk.partition_epoch)), 2)
    assert response["topics"][0]["partitions"][0]["error_code"] == ErrorCode.ineligible_replica
    assert controller.registration("t", 0) == shrunk


# ------------------------------------------------------------------------------------- leadership rules


def offline_on(broker_id: int, *partitions: int):
    return lambda p: {broker_id} if p.partition in partitions else set()


def test_without_broker_skips_replicas_offline_for_that_partition():
    partition = new_partition("t", TOPIC_ID, 0, [1, 2, 3])
    (changed,) = without_broker([partition], 1, [2, 3], lambda topic: False, offline_on(2, 0))
    assert (changed.leader, changed.isr) == (3, (3,))  # the election leaves ineligible replicas out of the ISR


def test_elect_offline_partitions_skips_offline_replicas_even_unclean():
    leaderless = new_partition("t", TOPIC_ID, 0, [1, 2])
    leaderless = dataclasses.replace(leaderless, leader=NO_LEADER, isr=(1,), leader_epoch=1, partition_epoch=1)
    assert elect_offline_partitions([leaderless], [1, 2], lambda topic: True, offline_on(1, 0))[0].leader == 2
    assert elect_offline_partitions([leaderless], [1], lambda topic: True, offline_on(1, 0)) == []


def test_preferred_leader_elections_skip_an_offline_preferred_replica():
    led_by_2 = new_partition("t", TOPIC_ID, 0, [2, 1])
    moved = new_partition("t", TOPIC_ID, 1, [1, 2])
    moved = dataclasses.replace(moved, leader=2, leader_epoch=1, partition_epoch=1)
    assert preferred_leader_elections([led_by_2, moved], [1, 2], 0)[0].leader == 1
    assert preferred_leader_elections([led_by_2, moved], [1, 2], 0, offline_on(1, 1)) == []
