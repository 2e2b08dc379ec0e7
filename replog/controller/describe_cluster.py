"""DescribeCluster (key 60) on a controller, as Kafka's ControllerApis answers it (KIP-919): the cluster id, the
active controller's id (the quorum's leader) and, as the "brokers", the controllers: the quorum's voters with
the addresses controller.quorum.voters gives them. It answers only requests for controller endpoints
(endpoint_type 2, v1): a v0 request or one for brokers gets INVALID_REQUEST (v0) or MISMATCHED_ENDPOINT_TYPE,
an unknown type UNSUPPORTED_ENDPOINT_TYPE, as Kafka's computeDescribeClusterResponse decides. Anyone may ask,
as anyone may describe the quorum here (Kafka asks ALTER on CLUSTER when an authorizer is configured)."""

from collections.abc import Mapping
from typing import Protocol

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.server.dispatch import RequestContext

ENDPOINT_TYPE_BROKER = 1
ENDPOINT_TYPE_CONTROLLER = 2
NO_AUTHORIZED_OPERATIONS = -(2**31)  # Kafka's "not requested / not supported"
NO_CONTROLLER = -1


class QuorumView(Protocol):
    """What the answer needs of the controller (ClusterController implements it)."""

    @property
    def cluster_id(self) -> str: ...

    @property
    def quorum_leader_id(self) -> int | None: ...

    @property
    def quorum_voters(self) -> Mapping[int, tuple[str, int]]: ...


def describe_cluster_body(view: QuorumView, api_version: int, endpoint_type: int) -> dict:
    body = {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "endpoint_type": ENDPOINT_TYPE_CONTROLLER, "cluster_id": view.cluster_id, "controller_id": NO_CONTROLLER,
            "cluster_authorized_operations": NO_AUTHORIZED_OPERATIONS, "brokers": []}
    if endpoint_type not in (ENDPOINT_TYPE_BROKER, ENDPOINT_TYPE_CONTROLLER):
        code = ErrorCode.invalid_request if api_version == 0 else ErrorCode.unsupported_endpoint_type
        return body | {"error_code": code, "error_message": f"Unsupported endpoint type {endpoint_type}"}
    if endpoint_type != ENDPOINT_TYPE_CONTROLLER:
        code = ErrorCode.invalid_request if api_version == 0 else ErrorCode.mismatched_endpoint_type
        return body | {"error_code": code, "error_message": "The request was sent to an endpoint of type "
                       "CONTROLLER, but we wanted an endpoint of type BROKER"}
    voters = view.quorum_voters
    leader = view.quorum_leader_id
    return body | {
        # Kafka answers -1 rather than name a controller it cannot list (KIP-919).
        "controller_id": leader if leader is not None and leader in voters else NO_CONTROLLER,
        "brokers": [{"broker_id": node_id, "host": host, "port": port, "rack": None}
                    for node_id, (host, port) in sorted(voters.items())],
    }


def handle_describe_cluster(ctx: RequestContext, view: QuorumView) -> list:
    request = decode_request(ApiKey.DESCRIBE_CLUSTER, ctx.api_version, ctx.frame, ctx.body_offset)
    # v0 has no endpoint_type: it asks for brokers.
    endpoint_type = int(getattr(request, "endpoint_type", ENDPOINT_TYPE_BROKER))
    body = describe_cluster_body(view, ctx.api_version, endpoint_type)
    return [encode_response(ApiKey.DESCRIBE_CLUSTER, ctx.api_version, body)]
