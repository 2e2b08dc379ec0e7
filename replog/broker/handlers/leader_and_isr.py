"""LeaderAndIsr (key 4), v7: the controller tells this broker which partitions it leads or follows.

A cluster action: only the authenticated controller may send it. The replica manager applies it (epoch
checks, become leader / become follower); this module decodes and answers per partition.
"""

import asyncio

from kio.schema.errors import ErrorCode

from replog.protocol.control import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicError,
    decode_leader_and_isr_request,
    encode_leader_and_isr_response,
)


async def handle(ctx, broker) -> list:
    request = decode_leader_and_isr_request(ctx.frame, ctx.body_offset)
    if not ctx.session.cluster_action:
        error, per_partition = ErrorCode.cluster_authorization_failed, {}
    elif broker.is_stale_broker_epoch(request.broker_epoch):
        error, per_partition = ErrorCode.stale_broker_epoch, {}
    else:
        # Shielded: a closed controller connection must not leave the request half applied.
        error, per_partition = await asyncio.shield(broker.replica_manager.become_leader_or_follower(request))
    topics = []
    for topic in request.topic_states:
        partition_errors = [
            LeaderAndIsrPartitionError(p.partition_index,
                                       per_partition.get((topic.topic_id, p.partition_index), error))
            for p in topic.partition_states
        ]
        topics.append(LeaderAndIsrTopicError(topic.topic_id, partition_errors))
    return [encode_leader_and_isr_response(LeaderAndIsrResponse(error, topics))]
