"""DeleteTopics (key 20), v1-6 (v6 names topics by name or id). In a cluster the controller decides (forwarded)."""

import logging

from kio.schema.errors import ErrorCode

from replog.client.errors import KafkaError
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security.acls import Operation, ResourceType
from replog.server.dispatch import RequestContext

from .context import TopicAdmin
from .forward_permitted import forward_permitted

log = logging.getLogger(__name__)


def handle(ctx: RequestContext, topics: TopicAdmin):
    request = decode_request(ApiKey.DELETE_TOPICS, ctx.api_version, ctx.frame, ctx.body_offset)
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    names = [name if name is not None else _name_of_id(topics, topic_id) for name, topic_id in wanted]
    deletable = topics.access.allowed(ctx, Operation.DELETE, ResourceType.TOPIC, (n for n in names if n is not None))
    refused = {i for i, name in enumerate(names) if name is not None and name not in deletable}
    if topics.in_cluster:
        return _forward(ctx, topics, request, wanted, refused)
    results = [_refusal(*wanted[i]) if i in refused else _delete(topics, name, topic_id)
               for i, (name, topic_id) in enumerate(wanted)]
    body = {"throttle_time": 0, "responses": results}
    return [encode_response(ApiKey.DELETE_TOPICS, ctx.api_version, body)]


def _name_of_id(topics: TopicAdmin, topic_id) -> str | None:
    return next((t.name for t in topics.image.topics.values() if t.topic_id == topic_id), None)


def _refusal(name: str | None, topic_id) -> dict:
    return {"name": name, "topic_id": topic_id, "error_code": ErrorCode.topic_authorization_failed,
            "error_message": "Authorization failed."}


async def _forward(ctx: RequestContext, topics: TopicAdmin, request, wanted, refused: set[int]) -> list:
    assert topics.forward_to_controller is not None
    field = "topics" if ctx.api_version >= 6 else "topic_names"
    items = getattr(request, field)
    try:
        return [await forward_permitted(
            ctx, topics.forward_to_controller, request, request_field=field,
            permitted=[item for i, item in enumerate(items) if i not in refused], response_field="responses",
            refusals=[_refusal(*wanted[i]) for i in sorted(refused)], empty_response={"throttle_time": 0})]
    except (KafkaError, OSError) as e:
        log.warning("forwarding DeleteTopics to the controller failed: %s", e)
        results = [{"name": name, "topic_id": topic_id, "error_code": ErrorCode.request_timed_out,
                    "error_message": f"controller unreachable: {e}"} for name, topic_id in wanted]
        return [encode_response(ApiKey.DELETE_TOPICS, ctx.api_version, {"throttle_time": 0, "responses": results})]


def _delete(topics: TopicAdmin, name: str | None, topic_id) -> dict:
    if name is None and topic_id is not None:
        name = _name_of_id(topics, topic_id)
        if name is None:
            return {"name": None, "topic_id": topic_id, "error_code": ErrorCode.unknown_topic_id,
                    "error_message": "no topic has that id"}
    topic = topics.delete_topic(name) if name is not None else None
    if topic is None:
        return {"name": name, "topic_id": topic_id, "error_code": ErrorCode.unknown_topic_or_partition,
                "error_message": f"topic {name!r} does not exist"}
    return {"name": name, "topic_id": topic.topic_id, "error_code": ErrorCode.none, "error_message": None}
