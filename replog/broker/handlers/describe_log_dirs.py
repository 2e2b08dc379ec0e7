"""DescribeLogDirs (key 35), v1-4: per log dir of this broker, the partitions in it with their sizes and
offset lag (Kafka's: high watermark minus log end offset, never below 0, for a current replica), and (v4,
KIP-827) the volume's total and usable bytes. A failed dir answers KAFKA_STORAGE_ERROR. kio has no v0."""

import shutil

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security.acls import Operation
from replog.server.dispatch import RequestContext

from ..access import Access
from ..replica_manager import ReplicaManager


def handle(ctx: RequestContext, replicas: ReplicaManager, access: Access) -> list:
    request = decode_request(ApiKey.DESCRIBE_LOG_DIRS, ctx.api_version, ctx.frame, ctx.body_offset)
    if not access.allows_cluster(ctx, Operation.DESCRIBE):  # v3+ carries the error; older ones answer nothing
        body = {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed, "results": []}
        return [encode_response(ApiKey.DESCRIBE_LOG_DIRS, ctx.api_version, body)]
    wanted = None if request.topics is None else {(t.topic, p) for t in request.topics for p in t.partitions}
    manager = replicas.log_manager
    results = []
    for log_dir in manager.log_dirs:
        if manager.failure_channel.is_offline(log_dir):
            results.append({"error_code": ErrorCode.kafka_storage_error, "log_dir": str(log_dir), "topics": [],
                            "total_bytes": -1, "usable_bytes": -1})
            continue
        by_topic: dict[str, list[dict]] = {}
        for key in sorted(manager.logs_in(log_dir)):
            log = manager.get_log(*key)
            if log is None or (wanted is not None and (key.topic, key.partition) not in wanted):
                continue
            by_topic.setdefault(key.topic, []).append({
                "partition_index": key.partition, "partition_size": log.size_in_bytes,
                "offset_lag": max(log.high_watermark - log.log_end_offset, 0), "is_future_key": False})
        try:
            usage = shutil.disk_usage(log_dir)
            total, usable = usage.total, usage.free
        except OSError:
            total = usable = -1
        results.append({"error_code": ErrorCode.none, "log_dir": str(log_dir), "total_bytes": total,
                        "usable_bytes": usable,
                        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
    body = {"throttle_time": 0, "error_code": ErrorCode.none, "results": results}
    return [encode_response(ApiKey.DESCRIBE_LOG_DIRS, ctx.api_version, body)]
