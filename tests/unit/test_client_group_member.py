"""The bundled consumer's group pieces that need no broker: Kafka's RangeAssignor and the ConsumerProtocol
encodings (checked against kafka-python's, an independent implementation, where it is installed)."""

import pytest

from replog.client.group_admin import consumer_assignment
from replog.client.group_member import encode_assignment, encode_subscription, range_assignment


@pytest.mark.parametrize(("members", "partitions", "expected"), [
    ({"a": {"t"}}, {"t": 3}, {"a": [("t", 0), ("t", 1), ("t", 2)]}),
    # contiguous ranges in member-id order; the first (count % members) get one more
    ({"b": {"t"}, "a": {"t"}}, {"t": 3}, {"a": [("t", 0), ("t", 1)], "b": [("t", 2)]}),
    ({"a": {"t"}, "b": {"t"}, "c": {"t"}}, {"t": 2}, {"a": [("t", 0)], "b": [("t", 1)], "c": []}),
    # per topic, among that topic's subscribers only
    ({"a": {"t", "u"}, "b": {"u"}}, {"t": 2, "u": 2},
     {"a": [("t", 0), ("t", 1), ("u", 0)], "b": [("u", 1)]}),
    ({"a": {"t"}}, {"t": 0}, {"a": []}),
])
def test_range_assignment(members, partitions, expected):
    assert range_assignment(members, partitions) == expected


def test_assignment_round_trips_and_matches_kafka_python():
    partitions = [("t", 2), ("t", 0), ("u", 1)]
    encoded = encode_assignment(partitions)
    assert consumer_assignment(encoded) == (("t", 0), ("t", 2), ("u", 1))
    metadata = pytest.importorskip("kafka.protocol.consumer.metadata")
    theirs = metadata.ConsumerProtocolAssignment.decode(encoded)
    assert [(tp.topic, tp.partitions) for tp in theirs.assigned_partitions] == [("t", [0, 2]), ("u", [1])]
    assert theirs.user_data is None


def test_subscription_matches_kafka_python():
    metadata = pytest.importorskip("kafka.protocol.consumer.metadata")
    theirs = metadata.ConsumerProtocolSubscription.decode(encode_subscription(["b", "a"]))
    assert (theirs.version, theirs.topics, theirs.user_data) == (0, ["a", "b"], None)
