"""UpdateMetadata (key 6), v8: the controller's view of brokers and partition leadership, which this broker
serves to clients in Metadata responses.

A cluster action: only the authenticated controller may send it; an older controller epoch is stale, and
so is one addressed to an earlier registration of this broker (a smaller broker epoch).
"""

from kio.schema.errors import ErrorCode

from replog.protocol.control import (
    UpdateMetadataResponse,
    decode_update_metadata_request,
    encode_update_metadata_response,
)
from replog.server.dispatch import RequestContext

from .context import ControlPlane


def handle(ctx: RequestContext, control: ControlPlane) -> list:
    request = decode_update_metadata_request(ctx.frame, ctx.body_offset)
    if not ctx.may_act_for_cluster:
        error = ErrorCode.cluster_authorization_failed
    elif control.registration.is_stale_broker_epoch(request.broker_epoch):
        error = ErrorCode.stale_broker_epoch
    elif request.controller_epoch < control.replicas.controller_epoch:
        error = ErrorCode.stale_controller_epoch
    else:
        control.replicas.controller_epoch = request.controller_epoch
        control.image.apply_update_metadata(request)
        control.registration.metadata_applied(request.broker_epoch)
        error = ErrorCode.none
    return [encode_update_metadata_response(UpdateMetadataResponse(error))]
