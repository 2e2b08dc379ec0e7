"""CreatePartitions (key 37), v0-3: add partitions to a topic. In a cluster the controller assigns and creates
them (forwarded, KIP-590); a single node adds partitions it leads itself."""

import logging
from collections import Counter

from kio.schema.errors import ErrorCode

from replog.client.errors import KafkaError
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security.acls import Operation, ResourceType
from replog.server.dispatch import RequestContext

from ..local_controller import TopicCreationError
from .context import ConfigAdmin
from .forward_permitted import forward_permitted

log = logging.getLogger(__name__)


def _body(results: list[tuple[str, ErrorCode, str | None]]) -> dict:
    return {"throttle_time": 0, "results": [{"name": name, "error_code": error, "error_message": message}
                                            for name, error, message in results]}


def handle(ctx: RequestContext, admin: ConfigAdmin):
    request = decode_request(ApiKey.CREATE_PARTITIONS, ctx.api_version, ctx.frame, ctx.body_offset)
    alterable = admin.access.allowed(ctx, Operation.ALTER, ResourceType.TOPIC, (t.name for t in request.topics))
    if admin.forward_to_controller is not None:
        return _forward(ctx, admin, request, alterable)
    names = Counter(t.name for t in request.topics)
    results = []
    for topic in request.topics:
        if topic.name not in alterable:
            results.append((topic.name, ErrorCode.topic_authorization_failed, None))
        elif names[topic.name] > 1:
            results.append((topic.name, ErrorCode.invalid_request, "Duplicate topic in request."))
            continue
        assignment = None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
        try:
            admin.local.create_partitions(topic.name, topic.count, assignment, validate_only=request.validate_only)
        except TopicCreationError as e:
            results.append((topic.name, e.error_code, str(e)))
        else:
            results.append((topic.name, ErrorCode.none, None))
    return [encode_response(ApiKey.CREATE_PARTITIONS, ctx.api_version, _body(results))]


async def _forward(ctx: RequestContext, admin: ConfigAdmin, request, alterable: set[str]) -> list:
    assert admin.forward_to_controller is not None
    refused = [(t.name, ErrorCode.topic_authorization_failed, None) for t in request.topics if t.name not in alterable]
    try:
        return [await forward_permitted(
            ctx, admin.forward_to_controller, request, request_field="topics",
            permitted=[t for t in request.topics if t.name in alterable], response_field="results",
            refusals=_body(refused)["results"], empty_response={"throttle_time": 0})]
    except (KafkaError, OSError) as e:
        log.warning("forwarding CreatePartitions to the controller failed: %s", e)
        results = [(t.name, ErrorCode.request_timed_out, f"controller unreachable: {e}") for t in request.topics]
        return [encode_response(ApiKey.CREATE_PARTITIONS, ctx.api_version, _body(results))]
