"""DescribeCluster (key 60), v0-1 (KIP-700): cluster id, controller id and live brokers with their racks, from
this broker's metadata image. The controller id is the one Metadata reports (clients cannot reach replog's
controller, as they cannot reach a KRaft controller); asking for controller endpoints (v1 endpoint_type 2,
KIP-919) is refused as a broker does."""

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security.acls import CLUSTER_NAME, ResourceType
from replog.server.dispatch import RequestContext

from ..access import OPERATIONS_NOT_REQUESTED
from .context import ConfigAdmin

ENDPOINT_TYPE_BROKER = 1


def handle(ctx: RequestContext, admin: ConfigAdmin) -> list:
    request = decode_request(ApiKey.DESCRIBE_CLUSTER, ctx.api_version, ctx.frame, ctx.body_offset)
    image = admin.image
    body = {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "endpoint_type": ENDPOINT_TYPE_BROKER, "cluster_id": image.cluster_id,
            "controller_id": image.controller_id, "cluster_authorized_operations": OPERATIONS_NOT_REQUESTED,
            # each broker's address on the listener this client came in by, as Metadata answers
            "brokers": [{"broker_id": b.node_id, "host": host, "port": port, "rack": b.rack}
                        for b in sorted(image.brokers.values(), key=lambda b: b.node_id)
                        for host, port in [b.address_for(ctx.session.listener_name)]]}
    if request.include_cluster_authorized_operations:  # KIP-430
        body["cluster_authorized_operations"] = admin.access.authorized_operations(ctx, ResourceType.CLUSTER,
                                                                                   CLUSTER_NAME)
    if getattr(request, "endpoint_type", ENDPOINT_TYPE_BROKER) != ENDPOINT_TYPE_BROKER:
        body.update(error_code=ErrorCode.unsupported_endpoint_type, brokers=[],
                    error_message="The request was sent to an endpoint of type BROKER, but we wanted an "
                                  "endpoint of type CONTROLLER")
    return [encode_response(ApiKey.DESCRIBE_CLUSTER, ctx.api_version, body)]
