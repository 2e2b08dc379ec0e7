"""StopReplica (key 5), v4: stop following partitions, deleting their logs when the controller says so.

A cluster action: only the authenticated controller may send it.
"""

import asyncio

from kio.schema.errors import ErrorCode

from replog.protocol.control import (
    StopReplicaPartitionError,
    StopReplicaResponse,
    decode_stop_replica_request,
    encode_stop_replica_response,
)
from replog.server.dispatch import RequestContext

from .context import ControlPlane


async def handle(ctx: RequestContext, control: ControlPlane) -> list:
    request = decode_stop_replica_request(ctx.frame, ctx.body_offset)
    if not ctx.may_act_for_cluster:
        error, per_partition = ErrorCode.cluster_authorization_failed, {}
    elif control.registration.is_stale_broker_epoch(request.broker_epoch):
        error, per_partition = ErrorCode.stale_broker_epoch, {}
    else:
        # Shielded: a closed controller connection must not leave the request half applied.
        error, per_partition = await asyncio.shield(control.replicas.stop_replicas(request))
    partition_errors = [
        StopReplicaPartitionError(topic.topic_name, p.partition_index,
                                  per_partition.get((topic.topic_name, p.partition_index), error))
        for topic in request.topic_states for p in topic.partition_states
    ]
    return [encode_stop_replica_response(StopReplicaResponse(error, partition_errors))]
