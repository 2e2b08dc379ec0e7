"""DeleteRecords (key 21), v0-2: the leader moves a partition's log start offset up to the given offset (-1:
the high watermark); reads below it then get OFFSET_OUT_OF_RANGE, retention deletes the segments wholly below
it, and followers move theirs from the log_start_offset of their Fetch responses. As Kafka's
DelayedDeleteRecords, the answer waits (up to the request's timeout) until the in-sync followers have moved
theirs too: low_watermark is then the smallest log start offset among them."""

import asyncio

from kio.schema.errors import ErrorCode

from replog.log.partition_log import TopicPartition
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response, millis
from replog.security.acls import Operation, ResourceType
from replog.server.dispatch import RequestContext

from ..access import Access
from ..delayed_delete_records import DelayedDeleteRecords, DeleteResults, move_log_start
from ..replica_manager import ReplicaManager


def handle(ctx: RequestContext, replicas: ReplicaManager, access: Access):
    request = decode_request(ApiKey.DELETE_RECORDS, ctx.api_version, ctx.frame, ctx.body_offset)
    deletable = access.allowed(ctx, Operation.DELETE, ResourceType.TOPIC, (t.name for t in request.topics))
    results: DeleteResults = {}
    for topic in request.topics:
        for p in topic.partitions:
            key = TopicPartition(topic.name, p.partition_index)
            if topic.name in deletable:
                results[key] = move_log_start(replicas.get_partition(*key), p.offset)
            else:
                results[key] = (-1, ErrorCode.topic_authorization_failed)
    moved = {key: offset for key, (offset, error) in results.items() if error == ErrorCode.none}
    for key in moved:
        replicas.log_start_moved(key)
    op = DelayedDeleteRecords(lambda key: replicas.get_partition(*key), millis(request.timeout), results, moved)
    if replicas.delete_records_purgatory.try_complete_else_watch(op, moved.keys()):
        return [_encode(ctx.api_version, results)]
    return _encode_later(op.future, ctx.api_version)


async def _encode_later(future: asyncio.Future, version: int) -> list:
    return [_encode(version, await future)]


def _encode(version: int, results: DeleteResults) -> bytes:
    by_topic: dict[str, list[dict]] = {}
    for (topic, index), (low_watermark, error) in results.items():
        by_topic.setdefault(topic, []).append({"partition_index": index, "low_watermark": low_watermark,
                                               "error_code": error})
    body = {"throttle_time": 0, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
    return encode_response(ApiKey.DELETE_RECORDS, version, body)
