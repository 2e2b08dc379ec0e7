"""`replog topics describe` prints what kafka-topics --describe prints, filters included."""

import argparse

import pytest

from replog.cli_clients import format_description
from replog.client.admin import PartitionDescription, TopicDescription
from replog.client.cluster_admin import OngoingReassignment

HEALTHY = PartitionDescription(0, 1, 3, (1, 2, 3), (1, 2, 3), ())
SHRUNK = PartitionDescription(1, 2, 4, (2, 3, 1), (2, 3), ())
LEADERLESS = PartitionDescription(2, -1, 5, (3, 1, 2), (3,), (3,))
TOPIC = TopicDescription("orders", (HEALTHY, SHRUNK, LEADERLESS))


def describe(under_replicated: bool = False, unavailable: bool = False) -> list[str]:
    args = argparse.Namespace(under_replicated_partitions=under_replicated, unavailable_partitions=unavailable)
    return format_description(TOPIC, args).splitlines()


def test_describe_prints_the_topic_header_then_every_partition():
    assert describe() == [
        "Topic: orders\tPartitionCount: 3\tReplicationFactor: 3",
        "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3",
        "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,3",
        "\tTopic: orders\tPartition: 2\tLeader: none\tReplicas: 3,1,2\tIsr: 3\tOffline: 3",
    ]


@pytest.mark.parametrize(("under_replicated", "unavailable", "partitions"), [
    (True, False, ["1", "2"]),
    (False, True, ["2"]),
], ids=["under-replicated partitions only", "unavailable partitions only"])
def test_a_partition_filter_prints_matching_partitions_and_no_header(under_replicated, unavailable, partitions):
    lines = describe(under_replicated, unavailable)
    assert [line.split("Partition: ")[1].split("\t")[0] for line in lines] == partitions
    assert not any(line.startswith("Topic:") for line in lines)


def test_a_filter_that_matches_nothing_prints_nothing():
    healthy = TopicDescription("fine", (HEALTHY,))
    args = argparse.Namespace(under_replicated_partitions=True, unavailable_partitions=False)
    assert format_description(healthy, args) == ""


def test_describe_shows_the_topic_overrides_in_the_header():
    args = argparse.Namespace(under_replicated_partitions=False, unavailable_partitions=False)
    header = format_description(TOPIC, args, {"retention.ms": "1000", "cleanup.policy": "delete"}).splitlines()[0]
    assert header == "Topic: orders\tPartitionCount: 3\tReplicationFactor: 3\tConfigs: cleanup.policy=delete,retention.ms=1000"


def test_a_partition_being_reassigned_shows_the_replicas_added_and_removed():
    """Partition 0 moves from 1,2,3 to 2,3,4: the replicas are 2,3,4,1 while 4 catches up (KIP-455); the
    topic's replication factor is what it will be, without the replica being added."""
    moving = PartitionDescription(0, 2, 3, (2, 3, 4, 1), (2, 3, 1), ())
    args = argparse.Namespace(under_replicated_partitions=False, unavailable_partitions=False)
    text = format_description(TopicDescription("orders", (moving, SHRUNK)), args, None,
                              {("orders", 0): OngoingReassignment((2, 3, 4, 1), (4,), (1,))})
    assert text.splitlines() == [
        "Topic: orders\tPartitionCount: 2\tReplicationFactor: 3",
        "\tTopic: orders\tPartition: 0\tLeader: 2\tReplicas: 2,3,4,1\tIsr: 2,3,1"
        "\tAdding Replicas: 4\tRemoving Replicas: 1",
        "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,3",
    ]
