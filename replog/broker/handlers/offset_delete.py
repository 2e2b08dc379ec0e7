"""OffsetDelete (key 47), v0: drop a group's committed offsets for partitions it no longer consumes
(KIP-496); GROUP_SUBSCRIBED_TO_TOPIC for a topic a live consumer group still subscribes to."""

from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.server.dispatch import RequestContext

from .context import GroupCoordination


def handle(ctx: RequestContext, groups: GroupCoordination):
    request = decode_request(ApiKey.OFFSET_DELETE, ctx.api_version, ctx.frame, ctx.body_offset)
    shell = groups.shell
    wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    error, errors, out = shell.coordinator.delete_offsets(request.group_id, wanted)
    shell.apply(out)
    by_topic: dict[str, list[dict]] = {}
    for topic, partition, partition_error in errors:
        by_topic.setdefault(topic, []).append({"partition_index": partition, "error_code": partition_error})
    body = {"error_code": error, "throttle_time": 0,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
    return [encode_response(ApiKey.OFFSET_DELETE, ctx.api_version, body)]
