"""OffsetCommit (key 8), v2-9: store a group's offsets in __consumer_offsets; answered once replicated as
with acks=all. Partitions of topics the broker does not know get UNKNOWN_TOPIC_OR_PARTITION, as Kafka's
KafkaApis answers them before the coordinator sees the request."""

from kio.schema.errors import ErrorCode

from replog.coordinator.offsets import CommitPartition, CommitRequest
from replog.coordinator.outcomes import CommitResult
from replog.coordinator.records import NO_LEADER_EPOCH
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response, millis
from replog.security.acls import Operation, ResourceType
from replog.server.dispatch import RequestContext

from .context import GroupCoordination
from .group_requests import submit


def handle(ctx: RequestContext, groups: GroupCoordination):
    version = ctx.api_version
    request = decode_request(ApiKey.OFFSET_COMMIT, version, ctx.frame, ctx.body_offset)
    retention = millis(request.retention_time) if version <= 4 else -1
    known, unknown = [], []
    # READ on the group for the whole request, then READ on each topic (KafkaApis.handleOffsetCommitRequest).
    group_readable = groups.access.allows(ctx, Operation.READ, ResourceType.GROUP, request.group_id)
    readable = groups.access.allowed(ctx, Operation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
    for topic in request.topics:
        exists = topic.name in groups.image.topics
        for p in topic.partitions:
            if not group_readable:
                unknown.append((topic.name, p.partition_index, ErrorCode.group_authorization_failed))
                continue
            if topic.name not in readable:
                unknown.append((topic.name, p.partition_index, ErrorCode.topic_authorization_failed))
                continue
            if not exists or p.partition_index not in groups.image.topics[topic.name].partitions:
                unknown.append((topic.name, p.partition_index, ErrorCode.unknown_topic_or_partition))
                continue
            known.append(CommitPartition(topic.name, p.partition_index, p.committed_offset,
                                         getattr(p, "committed_leader_epoch", NO_LEADER_EPOCH),
                                         p.committed_metadata))
    if not known:
        return [_encode(version, unknown)]
    shell = groups.shell
    future = submit(shell, lambda request_id: shell.coordinator.commit(CommitRequest(
        request_id, request.group_id, request.generation_id_or_member_epoch, request.member_id, tuple(known),
        getattr(request, "group_instance_id", None), retention), shell.now_ms))
    return _encode_later(future, version, unknown)


async def _encode_later(future, version: int, unknown: list) -> list:
    result: CommitResult = await future
    return [_encode(version, list(result.partitions) + unknown)]


def _encode(version: int, partitions: list[tuple[str, int, ErrorCode]]) -> bytes:
    by_topic: dict[str, list[dict]] = {}
    for topic, index, error in partitions:
        by_topic.setdefault(topic, []).append({"partition_index": index, "error_code": error})
    body = {"throttle_time": 0, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
    return encode_response(ApiKey.OFFSET_COMMIT, version, body)
