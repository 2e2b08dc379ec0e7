"""ListOffsets (key 2), v1-7: earliest (-2), latest (-1), max timestamp (-3, KIP-734), or by timestamp."""

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security.acls import Operation, ResourceType
from replog.server.dispatch import RequestContext

from ..access import Access
from ..partition import Partition
from ..replica_manager import ReplicaManager

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3


def handle(ctx: RequestContext, replicas: ReplicaManager, access: Access) -> list:
    request = decode_request(ApiKey.LIST_OFFSETS, ctx.api_version, ctx.frame, ctx.body_offset)
    describable = access.allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, (t.name for t in request.topics))
    topics = []
    for t in request.topics:
        partitions = [
            list_offset(replicas, t.name, p.partition_index, p.timestamp, getattr(p, "current_leader_epoch", -1),
                        from_follower=request.replica_id >= 0)
            if t.name in describable else
            {"partition_index": p.partition_index, "error_code": ErrorCode.topic_authorization_failed,
             "timestamp": -1, "offset": -1}
            for p in t.partitions
        ]
        topics.append({"name": t.name, "partitions": partitions})
    body = {"throttle_time": 0, "topics": topics}
    return [encode_response(ApiKey.LIST_OFFSETS, ctx.api_version, body)]


def list_offset(replicas: ReplicaManager, topic: str, index: int, timestamp: int, current_leader_epoch: int, *,
                from_follower: bool) -> dict:
    """One partition's answer."""
    partition = replicas.get_partition(topic, index)
    error = _partition_error(partition, current_leader_epoch)
    if error != ErrorCode.none:
        return {"partition_index": index, "error_code": error, "timestamp": -1, "offset": -1}
    found_timestamp, offset = _lookup(partition, timestamp, from_follower)
    epoch = partition.log.epoch_cache.epoch_for_offset(offset) if offset >= 0 else None
    return {"partition_index": index, "error_code": ErrorCode.none, "timestamp": found_timestamp,
            "offset": offset, "leader_epoch": -1 if epoch is None else epoch}


def _partition_error(partition: Partition | None, current_leader_epoch: int) -> ErrorCode:
    if partition is None:
        return ErrorCode.unknown_topic_or_partition
    if partition.storage_failed:
        return ErrorCode.kafka_storage_error
    if not partition.is_leader:
        return ErrorCode.not_leader_or_follower
    return partition.check_leader_epoch(current_leader_epoch)


def _lookup(partition: Partition, timestamp: int, from_follower: bool) -> tuple[int, int]:
    """(timestamp, offset); offsets a consumer may see stop at the high watermark."""
    log = partition.log
    visible_end = log.log_end_offset if from_follower else partition.high_watermark
    if timestamp == EARLIEST_TIMESTAMP:
        return -1, log.log_start_offset
    if timestamp == LATEST_TIMESTAMP:
        return -1, visible_end
    if timestamp == MAX_TIMESTAMP:
        found = log.offset_of_max_timestamp()
    else:
        found = log.offset_for_timestamp(timestamp)
    if found is None or found[0] >= visible_end:
        return -1, -1
    offset, found_timestamp = found
    return found_timestamp, offset
