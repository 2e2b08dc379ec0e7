"""InitProducerId (key 22), v0-4: producer ids for idempotent producers (no transactions yet).

A producer that passes its current id and epoch (v3+, KIP-360) gets the epoch bumped so it can reset its
sequences after a fatal error; the epoch wrapping past int16 gets a fresh id instead.
"""

from collections.abc import Callable

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security.acls import Operation, ResourceType
from replog.server.dispatch import RequestContext

from ..access import Access

MAX_PRODUCER_EPOCH = 32767


def handle(ctx: RequestContext, allocate_producer_id: Callable[[], int], access: Access) -> list:
    """allocate_producer_id: a producer id no other producer has (the local controller's allocator)."""
    request = decode_request(ApiKey.INIT_PRODUCER_ID, ctx.api_version, ctx.frame, ctx.body_offset)
    if request.transactional_id is not None:
        body = {"throttle_time": 0, "error_code": ErrorCode.transactional_id_authorization_failed,
                "producer_id": -1, "producer_epoch": -1}
        return [encode_response(ApiKey.INIT_PRODUCER_ID, ctx.api_version, body)]
    if not (access.allows_cluster(ctx, Operation.IDEMPOTENT_WRITE)
            or access.allows_any(ctx, Operation.WRITE, ResourceType.TOPIC)):
        # An idempotent producer needs IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (KIP-679).
        body = {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed,
                "producer_id": -1, "producer_epoch": -1}
        return [encode_response(ApiKey.INIT_PRODUCER_ID, ctx.api_version, body)]
    producer_id = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    if producer_id >= 0 and 0 <= epoch < MAX_PRODUCER_EPOCH - 1:
        epoch += 1
    else:
        producer_id, epoch = allocate_producer_id(), 0
    body = {"throttle_time": 0, "error_code": ErrorCode.none, "producer_id": producer_id, "producer_epoch": epoch}
    return [encode_response(ApiKey.INIT_PRODUCER_ID, ctx.api_version, body)]
