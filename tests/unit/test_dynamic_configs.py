"""Config change rules (KIP-339 operations, validation naming the key), the UpdateMetadata extension that
carries configs to brokers, and the controller's config records surviving replay."""

import uuid

import pytest
from kio.schema.errors import ErrorCode

from replog.controller import records
from replog.controller.admin import decide_config_changes, decide_new_partitions
from replog.controller.cluster import BrokerRegistration, ClusterMetadata, ControllerError
from replog.log.dynamic_configs import (
    DYNAMIC_BROKER_KEYS,
    AlterOp,
    ConfigChange,
    ConfigResource,
    InvalidConfigError,
    ResourceType,
    altered,
    altered_entity,
    topic_key_types,
)
from replog.log.topic_config import TOPIC_CONFIG_KEYS
from replog.protocol.control import (
    UpdateMetadataRequest,
    UpdateMetadataTopicState,
    decode_update_metadata_request,
    encode_update_metadata_request,
)

TOPIC = topic_key_types()


@pytest.mark.parametrize(("current", "changes", "incremental", "expected"), [
    ({"retention.ms": "1"}, [ConfigChange("segment.ms", "5")], False, {"segment.ms": "5"}),  # AlterConfigs replaces
    ({"retention.ms": "1"}, [ConfigChange("segment.ms", "5")], True, {"retention.ms": "1", "segment.ms": "5"}),
    ({"retention.ms": "1"}, [ConfigChange("retention.ms", None, AlterOp.DELETE)], True, {}),
    ({}, [ConfigChange("leader.replication.throttled.replicas", "0:1,0:2", AlterOp.APPEND)], True,
     {"leader.replication.throttled.replicas": "0:1,0:2"}),
    ({"leader.replication.throttled.replicas": "0:1"},
     [ConfigChange("leader.replication.throttled.replicas", "0:1,1:2", AlterOp.APPEND)], True,
     {"leader.replication.throttled.replicas": "0:1,1:2"}),
    ({"leader.replication.throttled.replicas": "0:1,1:2"},
     [ConfigChange("leader.replication.throttled.replicas", "0:1", AlterOp.SUBTRACT)], True,
     {"leader.replication.throttled.replicas": "1:2"}),
])
def test_alter_operations(current, changes, incremental, expected):
    assert altered(current, changes, incremental=incremental, key_types=TOPIC) == expected


@pytest.mark.parametrize(("changes", "named"), [
    ([ConfigChange("no.such.key", "1")], "no.such.key"),
    ([ConfigChange("retention.ms", "1", AlterOp.APPEND)], "retention.ms"),  # not a list
    ([ConfigChange("retention.ms", "1"), ConfigChange("retention.ms", "2")], "retention.ms"),
    ([ConfigChange("retention.ms", "soon")], "retention.ms"),
    ([ConfigChange("segment.bytes", "3")], "segment_bytes"),  # below Kafka's minimum of 14
    ([ConfigChange("min.insync.replicas", "0")], "min.insync.replicas"),
    ([ConfigChange("leader.replication.throttled.replicas", "zero:one")], "leader.replication.throttled.replicas"),
])
def test_invalid_topic_changes_name_the_key(changes, named):
    with pytest.raises(InvalidConfigError, match=named.replace(".", r"\.")):
        altered_entity(ResourceType.TOPIC, {}, changes, incremental=True)


def test_broker_configs_accept_log_defaults_and_throttle_rates_only():
    new = altered_entity(ResourceType.BROKER, {}, [ConfigChange("log.retention.ms", "1000"),
                                                   ConfigChange("leader.replication.throttled.rate", "50000000")],
                         incremental=True)
    assert new == {"log.retention.ms": "1000", "leader.replication.throttled.rate": "50000000"}
    assert "log.retention.bytes" in DYNAMIC_BROKER_KEYS
    with pytest.raises(InvalidConfigError, match="node.id"):
        altered_entity(ResourceType.BROKER, {}, [ConfigChange("node.id", "7")], incremental=True)
    with pytest.raises(InvalidConfigError, match="follower.replication.throttled.rate"):
        altered_entity(ResourceType.BROKER, {}, [ConfigChange("follower.replication.throttled.rate", "-5")],
                       incremental=True)


def _metadata_with_topic(partitions: int = 1, brokers=(1, 2, 3)) -> ClusterMetadata:
    metadata = ClusterMetadata()
    for b in brokers:
        metadata.add_broker(BrokerRegistration(b, "127.0.0.1", 9000 + b))
    metadata.create_topic("t", {i: (1, 2) for i in range(partitions)}, {})
    return metadata


def test_config_decisions_per_resource_and_replay():
    metadata = _metadata_with_topic()
    resources = [ConfigResource(ResourceType.TOPIC, "t", [ConfigChange("retention.ms", "1000")]),
                 ConfigResource(ResourceType.TOPIC, "missing", [ConfigChange("retention.ms", "1000")]),
                 ConfigResource(ResourceType.BROKER, "", [ConfigChange("log.retention.bytes", "1024")]),
                 ConfigResource(ResourceType.BROKER, "2", [ConfigChange("retention.ms", "1")])]
    outcomes, new_records = decide_config_changes(metadata, resources, incremental=True)
    assert [o.error_code for o in outcomes] == [ErrorCode.none, ErrorCode.unknown_topic_or_partition,
                                                ErrorCode.none, ErrorCode.invalid_config]
    assert "retention.ms" in outcomes[3].message
    assert metadata.topics["t"].configs == {}  # deciding changes nothing
    records.replay(new_records, metadata)
    assert metadata.topics["t"].configs == {"retention.ms": "1000"}
    assert metadata.broker_configs == {"": {"log.retention.bytes": "1024"}}
    # A restarted controller replays its snapshot to the same configs.
    rebuilt = ClusterMetadata()
    records.replay(records.snapshot_records(1, metadata), rebuilt)
    assert rebuilt.topics["t"].configs == {"retention.ms": "1000"}
    assert rebuilt.broker_configs == metadata.broker_configs


@pytest.mark.parametrize(("count", "assignment", "error", "message"), [
    (1, None, ErrorCode.invalid_partitions, "2 partition(s); 1 would not be an increase"),
    (2, None, ErrorCode.invalid_partitions, "already has 2 partition(s)"),
    (4, [[1, 2]], ErrorCode.invalid_replica_assignment, "add 2 additional partition(s), but only 1 assignment"),
    (3, [[1, 9]], ErrorCode.invalid_replica_assignment, "brokers [9] are not registered"),
    (3, [[1, 1]], ErrorCode.invalid_replica_assignment, "duplicates"),
    (3, [[]], ErrorCode.invalid_replica_assignment, "empty"),
    (3, [[1, 2, 3]], ErrorCode.invalid_replica_assignment, "replication factor is 2"),
])
def test_create_partitions_refusals(count, assignment, error, message):
    metadata = _metadata_with_topic(partitions=2)
    with pytest.raises(ControllerError) as caught:
        decide_new_partitions(metadata, "t", count, assignment)
    assert caught.value.error_code == error
    assert message in str(caught.value)


def test_create_partitions_assigns_new_partitions_round_robin():
    metadata = _metadata_with_topic()
    added = decide_new_partitions(metadata, "t", 4, None)
    assert [p.partition for p in added] == [1, 2, 3]
    assert all(len(p.replicas) == 2 and p.leader == p.replicas[0] for p in added)
    assert {p.leader for p in added} == {1, 2, 3}  # leaders spread over the brokers


def test_update_metadata_carries_topic_and_broker_configs():
    request = UpdateMetadataRequest(3000, 1, 5, [UpdateMetadataTopicState("t", uuid.uuid4(), [], {"retention.ms": "9"})],
                                    [], type=2, broker_configs={"": {"log.retention.ms": "1"}, "2": {}})
    decoded = decode_update_metadata_request(encode_update_metadata_request(request), 0)
    assert decoded.topic_states[0].configs == {"retention.ms": "9"}
    assert decoded.broker_configs == {"": {"log.retention.ms": "1"}, "2": {}}
    assert decoded.type == 2


def test_every_topic_config_replog_accepts_can_be_described_and_altered():
    assert TOPIC_CONFIG_KEYS <= set(TOPIC)
