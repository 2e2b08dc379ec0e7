"""ClusterMetadata: topic creation checks, elections, and AlterPartition decisions on decoded requests."""

import uuid

import pytest
from kio.schema.errors import ErrorCode

from replog.controller.cluster import (
    MAX_PARTITIONS_PER_TOPIC,
    BrokerRegistration,
    ClusterMetadata,
    ControllerError,
)
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_request


def cluster(*broker_ids: int) -> ClusterMetadata:
    metadata = ClusterMetadata()
    for broker_id in broker_ids:
        metadata.add_broker(BrokerRegistration(broker_id, "127.0.0.1", 9000 + broker_id))
    return metadata


@pytest.fixture
def metadata() -> ClusterMetadata:
    metadata = cluster(1, 2, 3)
    metadata.create_topic("t", {0: [1, 2, 3], 1: [2, 3, 1]}, {"min.insync.replicas": "2"})
    return metadata


# ------------------------------------------------------------------------------------------ create_topic


BAD_TOPICS = [
    ("illegal name", "bad/name", {0: [1]}, {}, ErrorCode.invalid_topic_exception),
    ("exists", "t", {0: [1]}, {}, ErrorCode.topic_already_exists),
    ("no partitions", "u", {}, {}, ErrorCode.invalid_partitions),
    ("too many partitions", "u", {i: [1] for i in range(MAX_PARTITIONS_PER_TOPIC + 1)}, {},
     ErrorCode.invalid_partitions),
    ("partitions not from 0", "u", {1: [1]}, {}, ErrorCode.invalid_replica_assignment),
    ("partition gap", "u", {0: [1], 2: [1]}, {}, ErrorCode.invalid_replica_assignment),
    ("no replicas", "u", {0: []}, {}, ErrorCode.invalid_replica_assignment),
    ("repeated replica", "u", {0: [1, 1]}, {}, ErrorCode.invalid_replica_assignment),
    ("negative replica", "u", {0: [-1]}, {}, ErrorCode.invalid_replica_assignment),
    ("unregistered replica", "u", {0: [1, 9]}, {}, ErrorCode.invalid_replica_assignment),
    ("uneven replication", "u", {0: [1, 2], 1: [1]}, {}, ErrorCode.invalid_replication_factor),
    ("unknown config", "u", {0: [1]}, {"no.such": "1"}, ErrorCode.invalid_config),
    ("non-integer config", "u", {0: [1]}, {"retention.ms": "soon"}, ErrorCode.invalid_config),
    ("min ISR below 1", "u", {0: [1]}, {"min.insync.replicas": "0"}, ErrorCode.invalid_config),
    ("unknown cleanup policy", "u", {0: [1]}, {"cleanup.policy": "compress"}, ErrorCode.invalid_config),
    ("dirty ratio above 1", "u", {0: [1]}, {"min.cleanable.dirty.ratio": "1.5"}, ErrorCode.invalid_config),
]


@pytest.mark.parametrize(("name", "assignment", "configs", "error"), [c[1:] for c in BAD_TOPICS],
                         ids=[c[0] for c in BAD_TOPICS])
def test_create_topic_refuses(metadata, name, assignment, configs, error):
    before = dict(metadata.topics)
    with pytest.raises(ControllerError) as raised:
        metadata.create_topic(name, assignment, configs)
    assert raised.value.error_code == error
    assert metadata.topics == before


def test_user_topics_and_the_offsets_topic_may_be_created_compacted(metadata):
    metadata.create_topic("__consumer_offsets", {0: [1, 2, 3]}, {"cleanup.policy": "compact"})
    metadata.create_topic("changelog", {0: [1, 2, 3]}, {"cleanup.policy": "compact,delete"})
    assert metadata.topics["__consumer_offsets"].configs == {"cleanup.policy": "compact"}
    assert metadata.topics["changelog"].configs == {"cleanup.policy": "compact,delete"}


def test_create_topic_registers_every_partition(metadata):
    topic = metadata.topics["t"]
    assert topic.configs == {"min.insync.replicas": "2"}
    p1 = metadata.registration("t", 1)
    assert (p1.topic_id, p1.replicas, p1.isr, p1.leader, p1.leader_epoch, p1.partition_epoch) == \
        (topic.topic_id, (2, 3, 1), (2, 3, 1), 2, 0, 0)
    assert metadata.topic_by_id(topic.topic_id) is topic
    assert {p.partition for p in metadata.partitions_with_replica(3)} == {0, 1}


def test_delete_topic_forgets_name_and_id(metadata):
    topic = metadata.delete_topic("t")
    assert metadata.topic_by_id(topic.topic_id) is None
    with pytest.raises(ControllerError) as raised:
        metadata.registration("t", 0)
    assert raised.value.error_code == ErrorCode.unknown_topic_or_partition
    with pytest.raises(ControllerError):
        metadata.delete_topic("t")


# ------------------------------------------------------------------------------------ elections and ISR


def test_elect_leader_defaults_to_the_current_isr(metadata):
    changed = metadata.elect_leader("t", 0, 2)
    assert (changed.leader, changed.isr, changed.leader_epoch, changed.partition_epoch) == (2, (1, 2, 3), 1, 1)
    assert metadata.registration("t", 0) is changed


@pytest.mark.parametrize(("leader", "isr", "error"), [
    (2, [1, 3], ErrorCode.invalid_request),  # leader outside the new ISR
    (4, [4], ErrorCode.invalid_request),  # not a replica
    (1, [1, 1], ErrorCode.invalid_request),
    (3, [3], ErrorCode.eligible_leaders_not_available),  # broker 3 unregistered below
])
def test_elect_leader_refuses(metadata, leader, isr, error):
    metadata.remove_broker(3)
    with pytest.raises(ControllerError) as raised:
        metadata.elect_leader("t", 0, leader, isr)
    assert raised.value.error_code == error
    assert metadata.registration("t", 0).leader_epoch == 0


def test_set_isr_keeps_the_leader_and_its_epoch(metadata):
    changed = metadata.set_isr("t", 0, [1, 3])
    assert (changed.leader, changed.isr, changed.leader_epoch, changed.partition_epoch) == (1, (1, 3), 0, 1)
    with pytest.raises(ControllerError):
        metadata.set_isr("t", 0, [2, 3])  # would drop the leader


def test_readding_a_broker_replaces_its_address():
    metadata = cluster(1)
    metadata.add_broker(BrokerRegistration(1, "127.0.0.1", 9999))
    assert metadata.brokers[1].port == 9999 and len(metadata.brokers) == 1


# ------------------------------------------------------------------------------------- AlterPartition


def alter_partition(version: int, broker_id: int, topic_id: uuid.UUID, *partitions: dict, broker_epoch: int = -1):
    """A request as the controller's handler sees it: encoded, then decoded with kio."""
    for p in partitions:
        p.setdefault("leader_recovery_state", 0)
        if version >= 3:
            p["new_isr_with_epochs"] = [{"broker_id": b, "broker_epoch": e} for b, e in p.pop("new_isr")]
    body = {"broker_id": broker_id, "broker_epoch": broker_epoch,
            "topics": [{"topic_id": topic_id, "partitions": list(partitions)}]}
    return decode_request(ApiKey.ALTER_PARTITION, version, encode_request(ApiKey.ALTER_PARTITION, version, body), 0)


def partition(index: int, new_isr, *, leader_epoch: int = 0, partition_epoch: int = 0) -> dict:
    return {"partition_index": index, "leader_epoch": leader_epoch, "new_isr": new_isr,
            "partition_epoch": partition_epoch}


def answers(decision) -> list[tuple]:
    return [(p["partition_index"], p["error_code"], p["isr"], p["partition_epoch"])
            for t in decision.response["topics"] for p in t["partitions"]]


def test_decide_shrinks_the_isr_without_applying_it(metadata):
    topic_id = metadata.topics["t"].topic_id
    decision = metadata.decide_alter_partition(alter_partition(2, 1, topic_id, partition(0, [1, 2])), 2)
    assert decision.response["error_code"] == ErrorCode.none
    assert answers(decision) == [(0, ErrorCode.none, [1, 2], 1)]
    assert metadata.registration("t", 0).isr == (1, 2, 3)  # decide changes nothing
    metadata.apply(decision.changes)
    assert metadata.registration("t", 0).isr == (1, 2) and metadata.registration("t", 0).partition_epoch == 1


def test_decide_answers_per_partition(metadata):
    topic_id = metadata.topics["t"].topic_id
    request = alter_partition(2, 1, topic_id, partition(0, [1, 3]), partition(1, [1, 2]), partition(5, [1]))
    decision = metadata.decide_alter_partition(request, 2)
    assert answers(decision) == [
        (0, ErrorCode.none, [1, 3], 1),
        (1, ErrorCode.invalid_request, [], -1),  # broker 2 leads partition 1
        (5, ErrorCode.unknown_topic_or_partition, [], -1),
    ]
    assert [c.partition for c in decision.changes] == [0]


def test_a_partition_named_twice_sees_its_first_change(metadata):
    topic_id = metadata.topics["t"].topic_id
    request = alter_partition(2, 1, topic_id, partition(0, [1, 2]), partition(0, [1]))
    decision = metadata.decide_alter_partition(request, 2)
    assert answers(decision) == [(0, ErrorCode.none, [1, 2], 1), (0, ErrorCode.invalid_update_version, [], -1)]
    assert len(decision.changes) == 1


def test_an_unchanged_isr_is_answered_with_the_current_state(metadata):
    topic_id = metadata.topics["t"].topic_id
    decision = metadata.decide_alter_partition(alter_partition(2, 1, topic_id, partition(0, [1, 2, 3])), 2)
    assert answers(decision) == [(0, ErrorCode.none, [1, 2, 3], 0)]
    assert decision.changes == []


def test_unknown_topic_id(metadata):
    decision = metadata.decide_alter_partition(alter_partition(2, 1, uuid.uuid4(), partition(0, [1])), 2)
    assert answers(decision) == [(0, ErrorCode.unknown_topic_id, [], -1)]


@pytest.mark.parametrize(("sender", "broker_epoch"), [(9, -1), (1, 42)])
def test_an_unregistered_sender_or_other_broker_epoch_is_stale(metadata, sender, broker_epoch):
    topic_id = metadata.topics["t"].topic_id
    request = alter_partition(2, sender, topic_id, partition(0, [1]), broker_epoch=broker_epoch)
    decision = metadata.decide_alter_partition(request, 2)
    assert decision.response["error_code"] == ErrorCode.stale_broker_epoch
    assert decision.response["topics"] == [] and decision.changes == []


def test_an_unregistered_member_is_ineligible(metadata):
    metadata.remove_broker(3)
    topic_id = metadata.topics["t"].topic_id
    decision = metadata.decide_alter_partition(alter_partition(2, 1, topic_id, partition(0, [1, 3])), 2)
    assert answers(decision) == [(0, ErrorCode.ineligible_replica, [], -1)]


@pytest.mark.parametrize(("member_epoch", "error"), [(-1, ErrorCode.none), (5, ErrorCode.ineligible_replica)])
def test_v3_checks_the_member_broker_epochs(metadata, member_epoch, error):
    # Brokers added by hand have no broker epoch; -1 asks the controller not to check (KIP-903).
    topic_id = metadata.topics["t"].topic_id
    request = alter_partition(3, 1, topic_id, partition(0, [(1, -1), (2, member_epoch)]))
    decision = metadata.decide_alter_partition(request, 3)
    assert answers(decision)[0][1] == error


# ------------------------------------------------------------------------- eligibility (KIP-841)


@pytest.mark.parametrize(("flags", "eligible", "live"), [
    ({}, True, True),
    ({"fenced": True}, False, False),  # gone from clients' metadata too
    ({"in_controlled_shutdown": True}, False, True),  # still listed while it hands over
])
def test_only_unfenced_brokers_not_shutting_down_are_eligible(flags, eligible, live):
    metadata = cluster(1, 3)
    metadata.add_broker(BrokerRegistration(2, "127.0.0.1", 9002, **flags))
    assert metadata.is_eligible(2) is eligible
    assert metadata.active_broker_ids() == ([1, 2, 3] if eligible else [1, 3])
    assert metadata.live_broker_ids() == ({1, 2, 3} if live else {1, 3})
    assert not metadata.is_eligible(9)  # unregistered


def test_a_broker_is_not_fenced_and_shutting_down_at_once():
    with pytest.raises(AssertionError):
        BrokerRegistration(1, "127.0.0.1", 9001, fenced=True, in_controlled_shutdown=True)


@pytest.mark.parametrize("flags", [{"fenced": True}, {"in_controlled_shutdown": True}])
@pytest.mark.parametrize("version", [2, 3])
def test_a_fenced_or_departing_member_is_ineligible(metadata, flags, version):
    metadata.add_broker(BrokerRegistration(3, "127.0.0.1", 9003, **flags))
    topic_id = metadata.topics["t"].topic_id
    new_isr = [1, 3] if version == 2 else [(1, -1), (3, -1)]
    decision = metadata.decide_alter_partition(alter_partition(version, 1, topic_id, partition(0, new_isr)),
                                               version)
    assert answers(decision) == [(0, ErrorCode.ineligible_replica, [], -1)]
    assert decision.changes == []


def test_leads_any():
    metadata = cluster(1, 2, 3)
    metadata.create_topic("t", {0: [1, 2], 1: [1, 3]}, {})
    assert [metadata.leads_any(b) for b in (1, 2, 3)] == [True, False, False]
