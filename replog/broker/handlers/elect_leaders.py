"""ElectLeaders (key 43), v0-2 (KIP-460): the controller elects (forwarded, KIP-590). A single node leads
every partition already: each election is not needed."""

import logging

from kio.schema.errors import ErrorCode

from replog.client.errors import KafkaError
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security.acls import Operation
from replog.server.dispatch import RequestContext

from .context import ConfigAdmin

log = logging.getLogger(__name__)

PREFERRED, UNCLEAN = 0, 1  # ElectLeaders v1+ election_type


def _body(error: ErrorCode, results: dict[str, list[tuple[int, ErrorCode, str | None]]]) -> dict:
    return {"throttle_time": 0, "error_code": error, "replica_election_results": [
        {"topic": topic, "partition_result": [{"partition_id": p, "error_code": code, "error_message": message}
                                              for p, code, message in partitions]}
        for topic, partitions in results.items()]}


def handle(ctx: RequestContext, admin: ConfigAdmin):
    request = decode_request(ApiKey.ELECT_LEADERS, ctx.api_version, ctx.frame, ctx.body_offset)
    if not admin.access.allows_cluster(ctx, Operation.ALTER):  # KafkaApis: ALTER on the cluster, whole request
        results: dict[str, list[tuple[int, ErrorCode, str | None]]] = {
            topic.topic: [(p, ErrorCode.cluster_authorization_failed, None) for p in topic.partitions]
            for topic in request.topic_partitions or ()}
        return [encode_response(ApiKey.ELECT_LEADERS, ctx.api_version,
                                _body(ErrorCode.cluster_authorization_failed, results))]
    if admin.forward_to_controller is not None:
        return _forward(ctx, admin, request)
    results = {}
    if getattr(request, "election_type", PREFERRED) not in (PREFERRED, UNCLEAN):  # v0 has no type: preferred
        for topic in request.topic_partitions or ():
            results[topic.topic] = [(p, ErrorCode.invalid_request, "unknown election type") for p in topic.partitions]
        return [encode_response(ApiKey.ELECT_LEADERS, ctx.api_version, _body(ErrorCode.invalid_request, results))]
    for topic in request.topic_partitions or ():  # all partitions: none needs an election, none is listed
        known = admin.image.topics.get(topic.topic)
        for partition in topic.partitions:
            if known is None or partition not in known.partitions:
                answer = (partition, ErrorCode.unknown_topic_or_partition, f"no partition {topic.topic}-{partition}")
            else:
                answer = (partition, ErrorCode.election_not_needed, "Leader election not needed for topic partition.")
            results.setdefault(topic.topic, []).append(answer)
    return [encode_response(ApiKey.ELECT_LEADERS, ctx.api_version, _body(ErrorCode.none, results))]


async def _forward(ctx: RequestContext, admin: ConfigAdmin, request) -> list:
    try:
        return [await admin.forward_to_controller(ctx)]
    except (KafkaError, OSError) as e:
        log.warning("forwarding ElectLeaders to the controller failed: %s", e)
        results = {t.topic: [(p, ErrorCode.request_timed_out, f"controller unreachable: {e}") for p in t.partitions]
                   for t in request.topic_partitions or ()}
        return [encode_response(ApiKey.ELECT_LEADERS, ctx.api_version, _body(ErrorCode.request_timed_out, results))]
