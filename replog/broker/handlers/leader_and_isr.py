"""LeaderAndIsr (key 4), v7: the controller tells this broker which partitions it leads or follows.

A cluster action: only the authenticated controller may send it. The broker's metadata image takes the
new leaderships first (what Metadata answers), then the replica manager applies them (epoch checks, become
leader / become follower); this module decodes and answers per partition.
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
from replog.server.dispatch import RequestContext

from .context import ControlPlane, Registration

# How long a LeaderAndIsr that arrives before this process has registered waits for the registration (a
# previous process's session must expire first, broker.session.timeout.ms). On timeout it is refused as
# stale: the controller sends every partition again when the registration succeeds.
REGISTRATION_WAIT_S = 10.0


async def wait_until_registered(registration: Registration) -> bool:
    """Whether this process has registered with the controller, waiting for it if need be.

    Only then can a request queued for this broker's previous process (an older broker epoch) be told from
    one for this process. Applying such a stale LeaderAndIsr made a broker restarted after losing unflushed
    records lead again in the same leader epoch with a shorter log, and acknowledge records at offsets the
    followers already held from that epoch with other values, which epochs cannot detect: acknowledged
    records were lost (tests/sim, seed 399). Kafka never serves controller requests before registering; its
    broker epoch check (KIP-380) relies on that.
    """
    lifecycle = registration.lifecycle
    if lifecycle is None:
        return True  # a single node, run by no controller
    try:
        async with asyncio.timeout(REGISTRATION_WAIT_S):
            await lifecycle.registered.wait()
    except TimeoutError:
        return False
    return True


async def handle(ctx: RequestContext, control: ControlPlane) -> list:
    request = decode_leader_and_isr_request(ctx.frame, ctx.body_offset)
    if not ctx.may_act_for_cluster:
        error, per_partition = ErrorCode.cluster_authorization_failed, {}
    elif (not await wait_until_registered(control.registration)
          or control.registration.is_stale_broker_epoch(request.broker_epoch)):
        error, per_partition = ErrorCode.stale_broker_epoch, {}
    else:
        if request.controller_epoch >= control.replicas.controller_epoch:
            control.image.apply_leadership(request)  # Metadata answers the new leaders from now on (KRaft's order)
        # Shielded: a closed controller connection must not leave the request half applied.
        error, per_partition = await asyncio.shield(control.replicas.become_leader_or_follower(request))
    topics = []
    for topic in request.topic_states:
        partition_errors = [
            LeaderAndIsrPartitionError(p.partition_index,
                                       per_partition.get((topic.topic_id, p.partition_index), error))
            for p in topic.partition_states
        ]
        topics.append(LeaderAndIsrTopicError(topic.topic_id, partition_errors))
    return [encode_leader_and_isr_response(LeaderAndIsrResponse(error, topics))]
