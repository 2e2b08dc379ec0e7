"""DeleteTopics (key 20), v1-6 (v6 names topics by name or id). In a cluster the controller decides (forwarded)."""

import logging

from kio.schema.errors import ErrorCode

from replog.client.errors import KafkaError
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.server.dispatch import RequestContext

from .context import TopicAdmin

log = logging.getLogger(__name__)


def handle(ctx: RequestContext, topics: TopicAdmin):
    request = decode_request(ApiKey.DELETE_TOPICS, ctx.api_version, ctx.frame, ctx.body_offset)
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    if topics.in_cluster:
        return _forward(ctx, topics, wanted)
    results = [_delete(topics, name, topic_id) for name, topic_id in wanted]
    body = {"throttle_time": 0, "responses": results}
    return [encode_response(ApiKey.DELETE_TOPICS, ctx.api_version, body)]


async def _forward(ctx: RequestContext, topics: TopicAdmin, wanted) -> list:
    try:
        return [await topics.forward_to_controller(ctx)]
    except (KafkaError, OSError) as e:
        log.warning("forwarding DeleteTopics to the controller failed: %s", e)
        results = [{"name": name, "topic_id": topic_id, "error_code": ErrorCode.request_timed_out,
                    "error_message": f"controller unreachable: {e}"} for name, topic_id in wanted]
        return [encode_response(ApiKey.DELETE_TOPICS, ctx.api_version, {"throttle_time": 0, "responses": results})]


def _delete(topics: TopicAdmin, name: str | None, topic_id) -> dict:
    if name is None and topic_id is not None:
        name = next((t.name for t in topics.image.topics.values() if t.topic_id == topic_id), None)
        if name is None:
            return {"name": None, "topic_id": topic_id, "error_code": ErrorCode.unknown_topic_id,
                    "error_message": "no topic has that id"}
    topic = topics.delete_topic(name) if name is not None else None
    if topic is None:
        return {"name": name, "topic_id": topic_id, "error_code": ErrorCode.unknown_topic_or_partition,
                "error_message": f"topic {name!r} does not exist"}
    return {"name": name, "topic_id": topic.topic_id, "error_code": ErrorCode.none, "error_message": None}
