"""Configs, partitions, records, leader elections and reassignments: the admin calls behind `replog configs`,
`replog topics alter`, `replog delete-records`, `replog leader-election` and `replog reassign` (Kafka's
kafka-configs, kafka-topics --alter, kafka-delete-records, kafka-leader-election, kafka-reassign-partitions)."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from ..protocol.apis import ApiKey
from .admin import Admin
from .errors import KafkaError

TOPIC, BROKER = 2, 4  # DescribeConfigs / AlterConfigs resource types
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations (KIP-339)
DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs' source of a topic override
PREFERRED, UNCLEAN = 0, 1  # ElectLeaders election types


@dataclass(frozen=True, slots=True)
class ConfigValue:
    name: str
    value: str | None
    source: int
    read_only: bool
    sensitive: bool


def _check(code: int, what: str, message: str | None) -> None:
    if code != ErrorCode.none:
        raise KafkaError(code, what + (f": {message}" if message else ""))


async def describe_configs(admin: Admin, resource_type: int, name: str) -> list[ConfigValue]:
    """Every config of a topic, or of a broker (asked of that broker, which alone knows its static values)."""
    request = {"resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": None}],
               "include_synonyms": False, "include_documentation": False}
    if not admin.cluster.metadata.brokers:  # a refresh waits out the retry backoff; known brokers suffice
        await admin.cluster.refresh()
    if resource_type == BROKER and name:
        connection = await admin.cluster.connection(int(name))
    else:
        connection = await admin.cluster.any_connection()
    response = await connection.send(ApiKey.DESCRIBE_CONFIGS, request)
    result = response.results[0]
    _check(int(result.error_code), f"{name!r}", result.error_message)
    return [ConfigValue(c.name, c.value, int(c.config_source), c.read_only, c.is_sensitive) for c in result.configs]


async def alter_configs(admin: Admin, resource_type: int, name: str, *, set_configs: Mapping[str, str],
                        delete_configs: Sequence[str], validate_only: bool = False) -> None:
    """IncrementalAlterConfigs: set some keys, delete (reset to default) others; the rest stay."""
    configs = [{"name": k, "config_operation": SET, "value": v} for k, v in set_configs.items()]
    configs += [{"name": k, "config_operation": DELETE, "value": None} for k in delete_configs]
    request = {"resources": [{"resource_type": resource_type, "resource_name": name, "configs": configs}],
               "validate_only": validate_only}
    response = await admin._controller_send(ApiKey.INCREMENTAL_ALTER_CONFIGS, request, admin.request_timeout_ms)
    result = response.responses[0]
    _check(int(result.error_code), f"{name!r}", result.error_message)


async def create_partitions(admin: Admin, topic: str, count: int,
                            assignment: Sequence[Sequence[int]] | None = None) -> None:
    request = {"topics": [{"name": topic, "count": count,
                           "assignments": None if assignment is None else [{"broker_ids": list(r)} for r in assignment]}],
               "timeout": admin.request_timeout_ms, "validate_only": False}
    response = await admin._controller_send(ApiKey.CREATE_PARTITIONS, request, admin.request_timeout_ms)
    result = response.results[0]
    _check(int(result.error_code), f"topic {topic!r}", result.error_message)


async def delete_records(admin: Admin, offsets: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """Move each partition's log start offset to the given one (-1: its high watermark), on its leader;
    returns the new low watermarks."""
    metadata = await admin.cluster.refresh({topic for topic, _ in offsets})
    by_leader: dict[int, dict[str, list[dict]]] = {}
    for (topic, partition), offset in offsets.items():
        info = metadata.topics.get(topic)
        leader = info.partitions[partition].leader if info is not None and partition in info.partitions else -1
        if leader < 0:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{topic}-{partition} has no known leader")
        by_leader.setdefault(leader, {}).setdefault(topic, []).append({"partition_index": partition, "offset": offset})
    low_watermarks = {}
    for leader, topics in by_leader.items():
        connection = await admin.cluster.connection(leader)
        request = {"topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                   "timeout": admin.request_timeout_ms}
        response = await connection.send(ApiKey.DELETE_RECORDS, request)
        for t in response.topics:
            for p in t.partitions:
                _check(int(p.error_code), f"{t.name}-{p.partition_index}", None)
                low_watermarks[(t.name, p.partition_index)] = p.low_watermark
    return low_watermarks


async def elect_leaders(admin: Admin, election_type: int,
                        partitions: Sequence[tuple[str, int]] | None) -> dict[tuple[str, int], tuple[int, str | None]]:
    """(error code, message) per partition; None elects every partition (only those that needed it answer)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions or ():
        by_topic.setdefault(topic, []).append(partition)
    request = {"election_type": election_type, "timeout": admin.request_timeout_ms,
               "topic_partitions": None if partitions is None else [{"topic": t, "partitions": ps}
                                                                    for t, ps in by_topic.items()]}
    response = await admin._controller_send(ApiKey.ELECT_LEADERS, request, admin.request_timeout_ms)
    _check(int(response.error_code), "ElectLeaders", None)
    return {(t.topic, p.partition_id): (int(p.error_code), p.error_message)
            for t in response.replica_election_results for p in t.partition_result}


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


async def alter_partition_reassignments(admin: Admin, targets: Mapping[tuple[str, int], Sequence[int] | None],
                                        *, allow_replication_factor_change: bool = True
                                        ) -> dict[tuple[str, int], tuple[int, str | None]]:
    """AlterPartitionReassignments (KIP-455): a target replica list per partition, None to cancel; the
    (error code, message) per partition. A request-wide error raises. Disallowing replication factor changes
    (KIP-860) needs v1, as Kafka's AdminClient does: an older broker would ignore the flag."""
    by_topic: dict[str, list[dict]] = {}
    for (topic, partition), replicas in targets.items():
        by_topic.setdefault(topic, []).append(
            {"partition_index": partition, "replicas": None if replicas is None else list(replicas)})
    request = {"timeout": admin.request_timeout_ms, "allow_replication_factor_change": allow_replication_factor_change,
               "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
    response = await admin._controller_send(ApiKey.ALTER_PARTITION_REASSIGNMENTS, request, admin.request_timeout_ms,
                                            min_version=0 if allow_replication_factor_change else 1)
    _check(int(response.error_code), "AlterPartitionReassignments", response.error_message)
    return {(t.name, p.partition_index): (int(p.error_code), p.error_message)
            for t in response.responses for p in t.partitions}


async def list_partition_reassignments(admin: Admin, partitions: Sequence[tuple[str, int]] | None = None
                                       ) -> dict[tuple[str, int], OngoingReassignment]:
    """The reassignments in progress, of every partition or of those asked about."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions or ():
        by_topic.setdefault(topic, []).append(partition)
    request = {"timeout": admin.request_timeout_ms,
               "topics": None if partitions is None else [{"name": t, "partition_indexes": ps}
                                                          for t, ps in by_topic.items()]}
    response = await admin._controller_send(ApiKey.LIST_PARTITION_REASSIGNMENTS, request, admin.request_timeout_ms)
    _check(int(response.error_code), "ListPartitionReassignments", response.error_message)
    return {(t.name, p.partition_index): OngoingReassignment(tuple(p.replicas), tuple(p.adding_replicas),
                                                             tuple(p.removing_replicas))
            for t in response.topics for p in t.partitions}
