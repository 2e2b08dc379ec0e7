"""Consumer group administration, as kafka-consumer-groups does it: list the groups of every broker, describe
a group at its coordinator (members and what each is assigned), its committed offsets against the log end
offsets (the lag), and delete it."""

import asyncio
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from ..protocol.apis import ApiKey
from ..protocol.primitives import DecodeError, Reader
from .cluster import Cluster
from .errors import KafkaError

# FindCoordinator answers these while __consumer_offsets is created or loaded: ask again, a few times.
COORDINATOR_RETRIABLE = (ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress,
                         ErrorCode.not_coordinator)
COORDINATOR_ATTEMPTS = 20
COORDINATOR_BACKOFF_S = 0.2
GROUP_KEY_TYPE = 0


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True, slots=True)
class GroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[tuple[str, int], ...]  # (topic, partition), from a consumer group's assignment


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[GroupMember, ...]
    coordinator: int


def consumer_assignment(data: bytes) -> tuple[tuple[str, int], ...]:
    """The partitions of a ConsumerProtocolAssignment (any version: later ones append fields after these);
    DecodeError if the bytes are not one. Empty bytes are no assignment."""
    if not data:
        return ()
    r = Reader(data)
    if r.int16() < 0:
        raise DecodeError("negative consumer protocol version")
    out = []
    for _ in range(max(0, r.array_length(compact=False))):
        topic = r.string(compact=False)
        out.extend((topic, r.int32()) for _ in range(max(0, r.array_length(compact=False))))
    return tuple(out)


async def find_coordinator(cluster: Cluster, group_id: str) -> int:
    """The node id coordinating the group; retries while the offsets topic is created or loaded."""
    for attempt in range(COORDINATOR_ATTEMPTS):
        conn = await cluster.any_connection()
        response = await conn.send(ApiKey.FIND_COORDINATOR, {
            "key": group_id, "key_type": GROUP_KEY_TYPE, "coordinator_keys": [group_id]})
        answer = response.coordinators[0] if hasattr(response, "coordinators") else response
        if answer.error_code == ErrorCode.none:
            if answer.node_id not in cluster.metadata.brokers:
                # Only then: a refresh right after another waits out the metadata back-off (100 ms).
                await cluster.refresh()
            return int(answer.node_id)
        if answer.error_code not in COORDINATOR_RETRIABLE or attempt == COORDINATOR_ATTEMPTS - 1:
            raise KafkaError(int(answer.error_code), f"finding the coordinator of group {group_id!r}")
        await asyncio.sleep(COORDINATOR_BACKOFF_S)
    raise AssertionError("unreachable")


async def list_groups(cluster: Cluster) -> list[GroupListing]:
    """Every broker's groups (each lists those it coordinates), sorted by id."""
    metadata = await cluster.refresh()
    listed = []
    for node_id in sorted(metadata.brokers):
        conn = await cluster.connection(node_id)
        response = await conn.send(ApiKey.LIST_GROUPS, {"states_filter": [], "types_filter": []})
        if response.error_code != ErrorCode.none:
            raise KafkaError(int(response.error_code), f"listing the groups of broker {node_id}")
        listed += [GroupListing(g.group_id, g.protocol_type, getattr(g, "group_state", ""))
                   for g in response.groups]
    return sorted(listed, key=lambda g: g.group_id)


async def describe_group(cluster: Cluster, group_id: str) -> GroupDescription:
    coordinator = await find_coordinator(cluster, group_id)
    conn = await cluster.connection(coordinator)
    response = await conn.send(ApiKey.DESCRIBE_GROUPS, {"groups": [group_id],
                                                        "include_authorized_operations": False})
    g = response.groups[0]
    if g.error_code != ErrorCode.none:
        raise KafkaError(int(g.error_code), f"describing group {group_id!r}")
    consumer = g.protocol_type == "consumer"
    members = tuple(
        GroupMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                    consumer_assignment(m.member_assignment) if consumer else ())
        for m in g.members)
    return GroupDescription(group_id, g.group_state, g.protocol_type, g.protocol_data, members, coordinator)


async def committed_offsets(cluster: Cluster, group_id: str) -> dict[tuple[str, int], int]:
    """Every partition the group has committed an offset for."""
    conn = await cluster.connection(await find_coordinator(cluster, group_id))
    response = await conn.send(ApiKey.OFFSET_FETCH, {
        "group_id": group_id, "topics": None, "require_stable": False,
        "groups": [{"group_id": group_id, "topics": None, "member_id": None, "member_epoch": -1}]})
    answer = response.groups[0] if hasattr(response, "groups") else response
    if answer.error_code != ErrorCode.none:
        raise KafkaError(int(answer.error_code), f"fetching the offsets of group {group_id!r}")
    return {(t.name, p.partition_index): p.committed_offset for t in answer.topics for p in t.partitions
            if p.error_code == ErrorCode.none and p.committed_offset >= 0}


async def delete_group(cluster: Cluster, group_id: str) -> None:
    """Raises KafkaError: NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND if there is none."""
    conn = await cluster.connection(await find_coordinator(cluster, group_id))
    response = await conn.send(ApiKey.DELETE_GROUPS, {"groups_names": [group_id]})
    error = response.results[0].error_code
    if error != ErrorCode.none:
        raise KafkaError(int(error), f"deleting group {group_id!r}")


async def alter_offsets(cluster: Cluster, group_id: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit offsets for a group from outside it (generation -1, no member id), as Kafka's admin
    alterConsumerGroupOffsets does; the coordinator refuses it with UNKNOWN_MEMBER_ID while the group has
    members, so a member that joined since the caller looked cannot have its offsets moved under it."""
    by_topic: dict[str, list[dict]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                               "committed_leader_epoch": -1, "committed_metadata": ""})
    conn = await cluster.connection(await find_coordinator(cluster, group_id))
    response = await conn.send(ApiKey.OFFSET_COMMIT, {
        "group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "retention_time": -1, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
    for topic in response.topics:
        for p in topic.partitions:
            if p.error_code != ErrorCode.none:
                raise KafkaError(int(p.error_code), f"committing {topic.name}-{p.partition_index} for group "
                                 f"{group_id!r}")
