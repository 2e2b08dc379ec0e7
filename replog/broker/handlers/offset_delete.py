"""OffsetDelete (key 47), v0: drop a group's committed offsets for partitions it no longer consumes
(KIP-496); GROUP_SUBSCRIBED_TO_TOPIC for a topic a live consumer group still subscribes to."""

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security.acls import Operation, ResourceType
from replog.server.dispatch import RequestContext

from .context import GroupCoordination


def handle(ctx: RequestContext, groups: GroupCoordination):
    request = decode_request(ApiKey.OFFSET_DELETE, ctx.api_version, ctx.frame, ctx.body_offset)
    shell = groups.shell
    wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    # DELETE on the group, READ on each topic (KafkaApis.handleOffsetDeleteRequest).
    if not groups.access.allows(ctx, Operation.DELETE, ResourceType.GROUP, request.group_id):
        error, errors = ErrorCode.group_authorization_failed, []
    else:
        readable = groups.access.allowed(ctx, Operation.READ, ResourceType.TOPIC, (t for t, _ in wanted))
        error, errors, out = shell.coordinator.delete_offsets(request.group_id, [w for w in wanted if w[0] in readable])
        shell.apply(out)
        errors = [*errors, *((t, p, ErrorCode.topic_authorization_failed) for t, p in wanted if t not in readable)]
    by_topic: dict[str, list[dict]] = {}
    for topic, partition, partition_error in errors:
        by_topic.setdefault(topic, []).append({"partition_index": partition, "error_code": partition_error})
    body = {"error_code": error, "throttle_time": 0,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
    return [encode_response(ApiKey.OFFSET_DELETE, ctx.api_version, body)]
