"""DeleteRecords (key 21), v0-2: the leader moves a partition's log start offset up to the given offset (-1:
the high watermark); reads below it then get OFFSET_OUT_OF_RANGE, retention deletes the segments wholly below
it, and followers move theirs from the log_start_offset of their Fetch responses.

Kafka parks the answer (DelayedDeleteRecords) until every replica's log start offset has reached the offset;
replog answers once the leader has moved it, with the leader's log start offset as low_watermark.
"""

from kio.schema.errors import ErrorCode

from replog.log.errors import OffsetOutOfRangeError
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.server.dispatch import RequestContext

from ..replica_manager import ReplicaManager

HIGH_WATERMARK = -1  # Kafka's DeleteRecordsRequest.HIGH_WATERMARK


def delete_records_on_leader(replicas: ReplicaManager, topic: str, index: int, offset: int) -> tuple[int, ErrorCode]:
    """(low watermark, error) for one partition."""
    partition = replicas.get_partition(topic, index)
    if partition is None:
        return -1, ErrorCode.unknown_topic_or_partition
    if partition.storage_failed:
        return -1, ErrorCode.kafka_storage_error
    if not partition.is_leader:
        return -1, ErrorCode.not_leader_or_follower
    log = partition.log
    target = log.high_watermark if offset == HIGH_WATERMARK else offset
    if target < 0 or target > log.high_watermark:
        return -1, ErrorCode.offset_out_of_range
    try:
        log.maybe_increment_log_start_offset(target)
    except OffsetOutOfRangeError:
        return -1, ErrorCode.offset_out_of_range
    return log.log_start_offset, ErrorCode.none


def handle(ctx: RequestContext, replicas: ReplicaManager) -> list:
    request = decode_request(ApiKey.DELETE_RECORDS, ctx.api_version, ctx.frame, ctx.body_offset)
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            low_watermark, error = delete_records_on_leader(replicas, topic.name, p.partition_index, p.offset)
            partitions.append({"partition_index": p.partition_index, "low_watermark": low_watermark,
                               "error_code": error})
        topics.append({"name": topic.name, "partitions": partitions})
    return [encode_response(ApiKey.DELETE_RECORDS, ctx.api_version, {"throttle_time": 0, "topics": topics})]
