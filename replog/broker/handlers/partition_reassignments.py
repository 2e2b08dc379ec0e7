"""AlterPartitionReassignments (key 45, v0-1) and ListPartitionReassignments (key 46, v0) (KIP-455): the
controller moves replicas (forwarded, KIP-590). A single node has one broker: its partitions can only stay where
they are, so a target of this broker alone is accepted (nothing to move) and any other names an unknown broker;
neither changes the replication factor, so v1's allowReplicationFactorChange (KIP-860) is only echoed."""

import logging

from kio.schema.errors import ErrorCode

from replog.client.errors import KafkaError
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security.acls import Operation
from replog.server.dispatch import RequestContext

from .context import ConfigAdmin

log = logging.getLogger(__name__)


def handle(ctx: RequestContext, admin: ConfigAdmin):
    api_key = ctx.header.api_key
    request = decode_request(api_key, ctx.api_version, ctx.frame, ctx.body_offset)
    listing = api_key == ApiKey.LIST_PARTITION_REASSIGNMENTS
    # KafkaApis: ALTER on the cluster to reassign, DESCRIBE to list; refused for the whole request.
    if not admin.access.allows_cluster(ctx, Operation.DESCRIBE if listing else Operation.ALTER):
        return [encode_response(api_key, ctx.api_version, _refusal(request, listing,
                                                                   ErrorCode.cluster_authorization_failed, None))]
    if admin.forward_to_controller is not None:
        return _forward(ctx, admin, request)
    if listing:
        return [encode_response(api_key, ctx.api_version, _refusal(request, True, ErrorCode.none, None))]
    results = {t.name: [(p.partition_index, *_single_node_answer(admin, t.name, p.partition_index, p.replicas))
                        for p in t.partitions] for t in request.topics}
    return [encode_response(api_key, ctx.api_version, _alter_body(request, ErrorCode.none, None, results))]


def _single_node_answer(admin: ConfigAdmin, topic: str, partition: int,
                        target: tuple[int, ...] | None) -> tuple[ErrorCode, str | None]:
    known = admin.image.topics.get(topic)
    if known is None or partition not in known.partitions:
        return ErrorCode.unknown_topic_or_partition, f"Unable to find partition: {topic}:{partition}"
    if target is None:
        return ErrorCode.no_reassignment_in_progress, f"No ongoing reassignment for partition {topic}-{partition}."
    node_id = admin.static.node_id
    if list(target) == [node_id]:
        return ErrorCode.none, None
    if not target:
        return ErrorCode.invalid_replica_assignment, "The manual partition assignment includes an empty replica list."
    if len(set(target)) != len(target):
        return ErrorCode.invalid_replica_assignment, (f"The manual partition assignment {list(target)} contains "
                                                      f"duplicate or negative replica ids.")
    unknown = next(r for r in target if r != node_id)
    return ErrorCode.invalid_replica_assignment, (f"The manual partition assignment includes broker {unknown}, but "
                                                  f"no such broker is registered.")


def _alter_body(request, error: ErrorCode, message: str | None,
                results: dict[str, list[tuple[int, ErrorCode, str | None]]]) -> dict:
    return {"throttle_time": 0, "error_code": error, "error_message": message,
            "allow_replication_factor_change": getattr(request, "allow_replication_factor_change", True),
            "responses": [
        {"name": topic, "partitions": [{"partition_index": p, "error_code": code, "error_message": text}
                                       for p, code, text in partitions]}
        for topic, partitions in results.items()]}


def _refusal(request, listing: bool, error: ErrorCode, message: str | None) -> dict:
    """A request-wide error; AlterPartitionReassignments repeats it for every partition, as Kafka does."""
    if listing:
        return {"throttle_time": 0, "error_code": error, "error_message": message, "topics": []}
    results = {t.name: [(p.partition_index, error, message) for p in t.partitions] for t in request.topics}
    return _alter_body(request, error, message, results)


async def _forward(ctx: RequestContext, admin: ConfigAdmin, request) -> list:
    api_key = ctx.header.api_key
    try:
        return [await admin.forward_to_controller(ctx)]
    except (KafkaError, OSError) as e:
        log.warning("forwarding %s to the controller failed: %s", ApiKey(api_key).name, e)
        body = _refusal(request, api_key == ApiKey.LIST_PARTITION_REASSIGNMENTS, ErrorCode.request_timed_out,
                        f"controller unreachable: {e}")
        return [encode_response(api_key, ctx.api_version, body)]
