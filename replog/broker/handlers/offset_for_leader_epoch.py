"""OffsetForLeaderEpoch (key 23), v2-4: the end offset of a leader epoch, from the leader-epoch cache.

Clients use it after a leader change to detect log truncation (KIP-320); followers use it to find where
their log diverges from the leader's (KIP-101, KIP-279).
"""

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security.acls import Operation, ResourceType
from replog.server.dispatch import RequestContext

from ..access import Access
from ..replica_manager import ReplicaManager


def handle(ctx: RequestContext, replicas: ReplicaManager, access: Access) -> list:
    request = decode_request(ApiKey.OFFSET_FOR_LEADER_EPOCH, ctx.api_version, ctx.frame, ctx.body_offset)
    # A replica id marks a follower (v3+); like a follower fetch, that is a cluster action (KafkaApis).
    denied = getattr(request, "replica_id", -2) >= 0 and not ctx.may_act_for_cluster
    # A consumer validating its position needs DESCRIBE on the topic (KafkaApis.handleOffsetForLeaderEpochRequest).
    describable = access.allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, (t.topic for t in request.topics))
    topics = []
    for t in request.topics:
        partitions = [_denied(p.partition, ErrorCode.cluster_authorization_failed) if denied else
                      _denied(p.partition, ErrorCode.topic_authorization_failed) if t.topic not in describable else
                      epoch_end_offset(replicas, t.topic, p.partition, p.current_leader_epoch, p.leader_epoch)
                      for p in t.partitions]
        topics.append({"topic": t.topic, "partitions": partitions})
    body = {"throttle_time": 0, "topics": topics}
    return [encode_response(ApiKey.OFFSET_FOR_LEADER_EPOCH, ctx.api_version, body)]


def _denied(index: int, error: ErrorCode) -> dict:
    return {"error_code": error, "partition": index, "leader_epoch": -1,
            "end_offset": -1}


def epoch_end_offset(replicas: ReplicaManager, topic: str, index: int, current_leader_epoch: int,
                     leader_epoch: int) -> dict:
    """One partition's answer."""
    partition = replicas.get_partition(topic, index)
    if partition is None:
        error = ErrorCode.unknown_topic_or_partition
    elif not partition.is_leader:
        error = ErrorCode.not_leader_or_follower
    else:
        error = partition.check_leader_epoch(current_leader_epoch)
    if error != ErrorCode.none:
        return {"error_code": error, "partition": index, "leader_epoch": -1, "end_offset": -1}
    epoch, end_offset = partition.log.epoch_cache.end_offset_for(leader_epoch, partition.log.log_end_offset)
    return {"error_code": ErrorCode.none, "partition": index, "leader_epoch": epoch, "end_offset": end_offset}
