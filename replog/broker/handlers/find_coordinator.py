"""FindCoordinator (key 10), v0-4: the broker leading __consumer_offsets partition
abs(javaStringHash(group)) % offsets.topic.num.partitions coordinates the group.

The offsets topic is created on the first request that needs it; until its partition has a live leader the
answer is COORDINATOR_NOT_AVAILABLE, which clients retry, as Kafka answers. Transaction coordinators (key
type 1) do not exist in replog yet: such a key is refused with INVALID_REQUEST and a message, so a
transactional producer fails at once instead of retrying for ever.
"""

from kio.schema.errors import ErrorCode

from replog.coordinator.partitioning import partition_for
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.protocol.topics import OFFSETS_TOPIC
from replog.security.acls import Operation, ResourceType
from replog.server.dispatch import RequestContext

from .context import GroupCoordination

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


def handle(ctx: RequestContext, groups: GroupCoordination):
    request = decode_request(ApiKey.FIND_COORDINATOR, ctx.api_version, ctx.frame, ctx.body_offset)
    key_type = KEY_TYPE_GROUP if ctx.api_version == 0 else request.key_type
    if ctx.api_version >= 4:
        answers = [_find(ctx, groups, key_type, key) for key in request.coordinator_keys]
        body = {"throttle_time": 0, "coordinators": answers}
    else:
        body = {"throttle_time": 0, **_find(ctx, groups, key_type, request.key)}
    return [encode_response(ApiKey.FIND_COORDINATOR, ctx.api_version, body)]


def _find(ctx: RequestContext, groups: GroupCoordination, key_type: int, key: str) -> dict:
    if key_type == KEY_TYPE_TRANSACTION:
        if not groups.access.allows(ctx, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
            return _error(key, ErrorCode.transactional_id_authorization_failed, "Authorization failed.")
        return _error(key, ErrorCode.invalid_request, "transaction coordinators are not supported by replog")
    if key_type != KEY_TYPE_GROUP:
        return _error(key, ErrorCode.invalid_request, f"unknown coordinator key type {key_type}")
    if not groups.access.allows(ctx, Operation.DESCRIBE, ResourceType.GROUP, key):
        return _error(key, ErrorCode.group_authorization_failed, "Authorization failed.")
    image = groups.image
    topic = image.topics.get(OFFSETS_TOPIC)
    if topic is None:
        groups.ensure_offsets_topic()
        topic = image.topics.get(OFFSETS_TOPIC)  # a single node creates it at once
        if topic is None:
            return _error(key, ErrorCode.coordinator_not_available, f"{OFFSETS_TOPIC} is being created")
    partition = topic.partitions.get(partition_for(key, len(topic.partitions)))
    if partition is None or partition.leader not in image.brokers:
        return _error(key, ErrorCode.coordinator_not_available, "the group's offsets partition has no leader")
    broker = image.brokers[partition.leader]
    host, port = broker.address_for(ctx.session.listener_name)  # on the listener the client came in by
    return {"key": key, "node_id": broker.node_id, "host": host, "port": port,
            "error_code": ErrorCode.none, "error_message": None}


def _error(key: str, code: ErrorCode, message: str) -> dict:
    return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": code, "error_message": message}
