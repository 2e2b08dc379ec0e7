"""A LeaderAndIsr's leaderships reach the broker's metadata image (what Metadata answers from) before the
replica manager applies them, as KRaft brokers publish the image before applying the delta; only newer
states of partitions the image already lists."""

import uuid
from types import SimpleNamespace

import pytest
from kio.schema.errors import ErrorCode

from replog.broker.handlers import leader_and_isr
from replog.broker.handlers.context import ControlPlane
from replog.broker.leader_hints import current_leader
from replog.broker.metadata import MetadataImage, PartitionMetadata, TopicMetadata
from replog.protocol.control import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
    encode_leader_and_isr_request,
)

TOPIC_ID = uuid.uuid4()


def image_with(leader: int = 1, leader_epoch: int = 5, partition_epoch: int = 7) -> MetadataImage:
    image = MetadataImage("cluster", 3000)
    image.topics["t"] = TopicMetadata("t", TOPIC_ID, {
        0: PartitionMetadata(leader, leader_epoch, partition_epoch, [1, 2, 3], [1, 2, 3], offline_replicas=[3])})
    return image


def request(*, leader: int = 2, leader_epoch: int = 6, partition_epoch: int = 8, partition: int = 0,
            topic: str = "t", topic_id: uuid.UUID = TOPIC_ID, controller_epoch: int = 1) -> LeaderAndIsrRequest:
    state = LeaderAndIsrPartitionState(topic, partition, controller_epoch, leader, leader_epoch, [2, 3],
                                       partition_epoch, [1, 2, 3])
    return LeaderAndIsrRequest(3000, controller_epoch, 10, [LeaderAndIsrTopicState(topic, topic_id, [state])], [])


def leadership(image: MetadataImage) -> tuple:
    p = image.topics["t"].partitions[0]
    return p.leader, p.leader_epoch, p.partition_epoch, p.isr, p.offline_replicas


@pytest.mark.parametrize(("sent", "taken"), [
    ({}, True),  # the failover: a new leader in a new epoch
    ({"leader": 1, "leader_epoch": 5, "partition_epoch": 8}, True),  # same leader, ISR shrank
    ({"leader_epoch": 5, "partition_epoch": 7}, False),  # what the image has: not newer
    ({"leader_epoch": 4, "partition_epoch": 9}, False),  # an older leader epoch
    ({"partition": 1}, False),  # a partition the image does not list (CreatePartitions: UpdateMetadata's)
    ({"topic": "u"}, False),  # a topic the image does not list (CreateTopics: UpdateMetadata's)
    ({"topic_id": uuid.uuid4()}, False),  # the topic was deleted and created again
])
def test_apply_leadership_takes_only_newer_states_of_partitions_it_lists(sent, taken):
    image = image_with()
    changed = image.apply_leadership(request(**sent))
    assert changed == (1 if taken else 0)
    if taken:
        expected = (sent.get("leader", 2), sent.get("leader_epoch", 6), sent.get("partition_epoch", 8), [2, 3], [3])
        assert leadership(image) == expected
    else:
        assert leadership(image) == (1, 5, 7, [1, 2, 3], [3])
    assert set(image.topics) == {"t"} and set(image.topics["t"].partitions) == {0}


class ApplyingReplicas:
    """The replica manager as the handler sees it; records what Metadata would answer while it applies."""

    def __init__(self, image: MetadataImage, controller_epoch: int = 1) -> None:
        self.image = image
        self.controller_epoch = controller_epoch
        self.leader_seen_while_applying: int | None = None

    async def become_leader_or_follower(self, request: LeaderAndIsrRequest):
        self.leader_seen_while_applying = self.image.topics["t"].partitions[0].leader
        return ErrorCode.none, {(TOPIC_ID, 0): ErrorCode.none}


def control_plane(image: MetadataImage, replicas: ApplyingReplicas) -> ControlPlane:
    registration = SimpleNamespace(lifecycle=None, is_stale_broker_epoch=lambda epoch: False)
    return ControlPlane(replicas, image, registration)  # type: ignore[arg-type]


def context(body: bytes) -> SimpleNamespace:
    return SimpleNamespace(frame=bytearray(body), body_offset=0, may_act_for_cluster=True)


async def test_the_image_names_the_new_leader_before_the_replica_manager_applies_it():
    image = image_with()
    replicas = ApplyingReplicas(image)
    await leader_and_isr.handle(context(encode_leader_and_isr_request(request())), control_plane(image, replicas))
    assert replicas.leader_seen_while_applying == 2


async def test_a_request_from_a_stale_controller_leaves_the_image_alone():
    image = image_with()
    replicas = ApplyingReplicas(image, controller_epoch=2)
    await leader_and_isr.handle(context(encode_leader_and_isr_request(request(controller_epoch=1))),
                                control_plane(image, replicas))
    assert leadership(image) == (1, 5, 7, [1, 2, 3], [3])


def test_a_leader_hint_comes_from_the_image_while_the_replica_still_holds_an_older_epoch():
    image = image_with(leader=2, leader_epoch=6)
    not_yet_applied = SimpleNamespace(state=SimpleNamespace(leader=1, leader_epoch=5))
    hint = current_leader(not_yet_applied, image, "t", 0)  # type: ignore[arg-type]
    assert (hint.leader_id, hint.leader_epoch) == (2, 6)
    applied = SimpleNamespace(state=SimpleNamespace(leader=2, leader_epoch=6))
    hint = current_leader(applied, image, "t", 0)  # type: ignore[arg-type]
    assert (hint.leader_id, hint.leader_epoch) == (2, 6)
