"""Produce (key 0), v3-9: append each partition's batches as leader; answer per acks.

acks=0 sends no response (an error closes the connection so the client refreshes metadata, like Kafka);
acks=1 answers after the local append; acks=all parks a DelayedProduce until the high watermark passes
every appended partition's last offset, or the request timeout.
"""

import asyncio

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.messages import encode_response
from replog.protocol.produce import decode_produce_request

from ..delayed_produce import DelayedProduce
from ..replica_manager import PartitionAppendResult

VALID_ACKS = (-1, 0, 1)


def handle(ctx, broker):
    request = decode_produce_request(ctx.api_version, ctx.frame, ctx.body_offset)
    results: dict[tuple[str, int], PartitionAppendResult] = {}
    for topic in request.topics:
        for p in topic.partitions:
            key = (topic.name, p.index)
            if request.acks not in VALID_ACKS:
                results[key] = PartitionAppendResult(ErrorCode.invalid_required_acks)
            elif request.transactional_id is not None:
                results[key] = PartitionAppendResult(ErrorCode.transactional_id_authorization_failed,
                                                     error_message="transactions are not supported")
            else:
                results[key] = broker.replica_manager.append_to_partition(topic.name, p.index, p.records,
                                                                          request.acks)
    if request.acks == 0:
        if any(r.error_code != ErrorCode.none for r in results.values()):
            ctx.close_connection()
        return None
    # A duplicate (a retried batch) waits like a new append: the original may not be committed yet, and
    # Kafka's ReplicaManager.appendRecords waits for the HW to pass its offsets all the same.
    appended = {k: r for k, r in results.items() if r.error_code == ErrorCode.none}
    if request.acks == -1 and appended:
        op = DelayedProduce(broker.replica_manager, request.timeout_ms, results, appended)
        broker.replica_manager.produce_purgatory.try_complete_else_watch(op, appended.keys())
        return _encode_later(op.future, ctx.api_version)
    return [_encode(ctx.api_version, results)]


async def _encode_later(future: asyncio.Future, version: int) -> list:
    return [_encode(version, await future)]


def _encode(version: int, results: dict[tuple[str, int], PartitionAppendResult]) -> bytes:
    by_topic: dict[str, list[dict]] = {}
    for (topic, index), r in results.items():
        info = r.info
        by_topic.setdefault(topic, []).append({
            "index": index,
            "error_code": r.error_code,
            "base_offset": info.first_offset if info else -1,
            "log_append_time": None,
            "log_start_offset": info.log_start_offset if info else -1,
            "record_errors": [],
            "error_message": r.error_message,
        })
    body = {"responses": [{"name": t, "partition_responses": ps} for t, ps in by_topic.items()],
            "throttle_time": 0}
    return encode_response(ApiKey.PRODUCE, version, body)
