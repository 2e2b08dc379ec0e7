"""The classic group's state and bookkeeping (coordinator/group.py): the legal state transitions, protocol
selection, leader choice, the consumer subscription, and the config's Kafka names."""

import importlib
import io
import itertools
import struct

import pytest
from kio.serial import entity_writer
from kio.static.primitive import i32

from replog.coordinator.config import GroupCoordinatorConfig
from replog.coordinator.consumer_protocol import subscription_topics
from replog.coordinator.group import (
    VALID_PREVIOUS_STATES,
    ClassicGroup,
    GroupState,
    IllegalGroupTransition,
    Member,
)
from replog.protocol.primitives import DecodeError

S = GroupState

# Written out one by one, independently of the module's table (Kafka's GroupState.validPreviousStates).
LEGAL_MOVES = {
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.COMPLETING_REBALANCE, S.STABLE),
    (S.EMPTY, S.DEAD),
    (S.PREPARING_REBALANCE, S.DEAD),
    (S.COMPLETING_REBALANCE, S.DEAD),
    (S.STABLE, S.DEAD),
    (S.DEAD, S.DEAD),
}


def test_the_transition_table_is_kafkas():
    assert {
        (before, after) for after, befores in VALID_PREVIOUS_STATES.items() for before in befores
    } == LEGAL_MOVES


@pytest.mark.parametrize(
    ("before", "after"), list(itertools.product(S, S)), ids=lambda s: s.value if isinstance(s, S) else str(s)
)
def test_a_transition_is_made_exactly_when_it_is_legal(before, after):
    group = ClassicGroup("g", state=before)
    if (before, after) in LEGAL_MOVES:
        group.transition_to(after, 42)
        assert (group.state, group.state_timestamp_ms) == (after, 42)
    else:
        with pytest.raises(IllegalGroupTransition):
            group.transition_to(after, 42)
        assert group.state is before


def member(member_id: str, *protocols: str, instance: str | None = None) -> Member:
    return Member(
        member_id,
        instance,
        "client",
        "/h",
        60000,
        10000,
        "consumer",
        tuple((name, name.encode()) for name in protocols),
    )


@pytest.mark.parametrize(
    ("preferences", "expected"),
    [
        ([("range",)], "range"),
        # Only protocols every member supports are candidates, whatever the preferences.
        ([("sticky", "range"), ("range",)], "range"),
        # Each member votes for its first candidate; most votes wins.
        ([("sticky", "range"), ("range", "sticky"), ("sticky", "range")], "sticky"),
        ([("range", "sticky"), ("range", "sticky"), ("sticky", "range")], "range"),
        # A tie goes to the first member's preference (Kafka: hash order).
        ([("range", "sticky"), ("sticky", "range")], "range"),
        ([("sticky", "range"), ("range", "sticky")], "sticky"),
        ([("a", "b", "c"), ("b", "c", "a"), ("c", "a", "b")], "a"),
    ],
    ids=[
        "a lone member's protocol",
        "only common protocols count",
        "the majority preference wins",
        "the majority preference wins the other way",
        "a tie goes to the first member (range)",
        "a tie goes to the first member (sticky)",
        "votes split three ways, first member decides",
    ],
)
def test_protocol_selection(preferences, expected):
    group = ClassicGroup("g")
    for i, protocols in enumerate(preferences):
        group.add(member(f"m{i}", *protocols))
    assert group.select_protocol() == expected


@pytest.mark.parametrize(
    ("state", "protocol_type", "protocols", "expected"),
    [
        (S.EMPTY, "consumer", {"anything"}, True),  # an Empty group takes any first member
        (S.EMPTY, "", {"range"}, False),
        (S.EMPTY, "consumer", set(), False),
        (S.STABLE, "consumer", {"range"}, True),
        (S.STABLE, "consumer", {"sticky", "range"}, True),
        (S.STABLE, "consumer", {"sticky"}, False),  # nothing in common with the members
        (S.STABLE, "connect", {"range"}, False),  # another protocol type
    ],
)
def test_supports_protocols(state, protocol_type, protocols, expected):
    group = ClassicGroup("g")
    group.add(member("m0", "range", "roundrobin"))
    group.state = state
    assert group.supports_protocols(protocol_type, protocols) is expected


def test_a_rebalancing_group_whose_members_all_left_takes_any_protocol_of_its_type():
    group = ClassicGroup("g", state=S.PREPARING_REBALANCE, protocol_type="consumer")
    group.pending_members["c-1"] = 10_000  # it waits for this id before completing the join
    assert group.supports_protocols("consumer", {"sticky"})
    assert not group.supports_protocols("connect", {"sticky"})


def test_the_first_member_leads_and_the_oldest_remaining_takes_over():
    group = ClassicGroup("g")
    for member_id in ("a", "b", "c"):
        group.add(member(member_id, "range"))
    assert group.leader_id == "a"
    group.remove("a")
    assert group.leader_id == "b"
    group.remove("c")
    group.remove("b")
    assert group.leader_id is None and group.size == 0


def test_a_static_member_is_indexed_by_instance_id_until_it_is_removed():
    group = ClassicGroup("g")
    group.add(member("a", "range", instance="i-a"))
    assert group.static_members == {"i-a": "a"}
    replaced = group.replace_static_member("i-a", "a", "a2")
    assert (replaced.member_id, group.leader_id, group.static_members) == ("a2", "a2", {"i-a": "a2"})
    group.remove("a2")
    assert group.static_members == {}


def subscription(version: int, *topics: str, tail: bytes = b"") -> bytes:
    data = struct.pack(">hi", version, len(topics))
    for topic in topics:
        data += struct.pack(">h", len(topic)) + topic.encode()
    return data + tail


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (subscription(0, "a", "b", tail=b"\xff\xff\xff\xff"), ["a", "b"]),
        # Later versions append owned partitions, generation and rack: the topics prefix is the same.
        (subscription(3, "orders", tail=b"\x00\x00\x00\x00" + b"\x00" * 12), ["orders"]),
        (subscription(1), []),
    ],
)
def test_consumer_subscription_topics(data, expected):
    assert subscription_topics(data) == expected


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_consumer_subscription_topics_of_what_kios_encoder_writes(version):
    """kio generates its codec from Kafka's ConsumerProtocolSubscription.json; the client puts the int16
    version in front (ConsumerProtocol.serializeSubscription)."""
    module = importlib.import_module(f"kio.schema.consumer_protocol_subscription.v{version}.data")
    fields = {"topics": ("orders", "payments"), "user_data": b"\x01\x02"}
    if version >= 1:
        fields["owned_partitions"] = (module.TopicPartition(topic="orders", partitions=(i32(0), i32(3))),)
    if version >= 2:
        fields["generation_id"] = i32(12)
    if version >= 3:
        fields["rack_id"] = "rack-a"
    entity = module.ConsumerProtocolSubscription(**fields)
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    assert subscription_topics(struct.pack(">h", version) + out.getvalue()) == ["orders", "payments"]


@pytest.mark.parametrize("data", [b"", b"\x00", subscription(0, "abc")[:-1], struct.pack(">hi", 0, 99)])
def test_consumer_subscription_that_does_not_parse(data):
    with pytest.raises(DecodeError):
        subscription_topics(data)


def test_a_consumer_group_knows_its_topics_only_when_every_member_parses():
    group = ClassicGroup("g")
    a = member("a", "range")
    a.protocols = (("range", subscription(0, "x", "y")),)
    b = member("b", "range")
    b.protocols = (("range", subscription(0, "y", "z")),)
    group.add(a)
    group.add(b)
    group.protocol_name = "range"
    assert group.compute_subscribed_topics() == {"x", "y", "z"}
    b.protocols = (("range", b"garbage"),)
    assert group.compute_subscribed_topics() is None  # unknown: treated as subscribed to everything
    assert group.subscribed_topics is None and group.is_subscribed_to("anything")


def test_config_defaults_are_kafkas_and_read_from_property_names():
    default = GroupCoordinatorConfig()
    assert (
        default.group_initial_rebalance_delay_ms,
        default.group_min_session_timeout_ms,
        default.group_max_session_timeout_ms,
        default.group_max_size,
    ) == (3000, 6000, 1_800_000, 2**31 - 1)
    assert (
        default.offsets_retention_minutes,
        default.offsets_topic_num_partitions,
        default.offsets_topic_replication_factor,
        default.offsets_topic_segment_bytes,
        default.offsets_commit_timeout_ms,
    ) == (10080, 50, 3, 104_857_600, 5000)
    parsed = GroupCoordinatorConfig.from_properties(
        {"group.max.size": "5", "offsets.topic.num.partitions": "3", "log.dirs": "/x"}
    )
    assert (parsed.group_max_size, parsed.offsets_topic_num_partitions) == (5, 3)
    assert parsed.offsets_retention_ms == 10080 * 60_000
