"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), v1-3.

As Kafka's KafkaApis: DescribeAcls needs DESCRIBE on the cluster and is answered from this broker's copy of
the bindings; CreateAcls and DeleteAcls need ALTER on the cluster (else every entry answers
CLUSTER_AUTHORIZATION_FAILED) and are the controller's to carry out (forwarded, KIP-590), or the single
node's own. Without an authorizer (`authorizer.class.name` unset) Kafka answers SECURITY_DISABLED.
"""

import logging

from kio.schema.errors import ErrorCode

from replog.client.errors import KafkaError
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security import acl_requests
from replog.security.acls import Operation
from replog.server.dispatch import RequestContext

from .context import ConfigAdmin

log = logging.getLogger(__name__)

_NO_AUTHORIZER = "No Authorizer is configured."


def handle(ctx: RequestContext, admin: ConfigAdmin):
    api_key = ctx.header.api_key
    request = decode_request(api_key, ctx.api_version, ctx.frame, ctx.body_offset)
    if api_key == ApiKey.DESCRIBE_ACLS:
        return [encode_response(api_key, ctx.api_version, _describe(ctx, admin, request))]
    count = len(request.creations) if api_key == ApiKey.CREATE_ACLS else len(request.filters)
    refusal = _refusal(ctx, admin)
    if refusal is not None:
        return [encode_response(api_key, ctx.api_version, _error_body(api_key, count, *refusal))]
    if admin.forward_to_controller is not None:
        return _forward(ctx, admin, count)
    if api_key == ApiKey.CREATE_ACLS:
        changes = acl_requests.decide_creations(admin.image.acls, acl_requests.bindings_of_creations(request))
    else:
        changes = acl_requests.decide_deletions(admin.image.acls, [acl_requests.filter_of(f) for f in request.filters])
    admin.local.change_acls(changes)
    return [encode_response(api_key, ctx.api_version, changes.body)]


def _describe(ctx: RequestContext, admin: ConfigAdmin, request) -> dict:
    if not admin.access.enabled:
        return acl_requests.error_describe_body(ErrorCode.security_disabled, _NO_AUTHORIZER)
    if not admin.access.allows_cluster(ctx, Operation.DESCRIBE):
        return acl_requests.error_describe_body(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
    return acl_requests.describe_body(admin.image.acls, acl_requests.filter_of(request))


def _refusal(ctx: RequestContext, admin: ConfigAdmin) -> tuple[ErrorCode, str | None] | None:
    if not admin.access.enabled:
        return ErrorCode.security_disabled, _NO_AUTHORIZER
    if not admin.access.allows_cluster(ctx, Operation.ALTER):
        return ErrorCode.cluster_authorization_failed, None
    return None


def _error_body(api_key: int, count: int, error: ErrorCode, message: str | None) -> dict:
    if api_key == ApiKey.CREATE_ACLS:
        return acl_requests.error_create_body(count, error, message)
    return acl_requests.error_delete_body(count, error, message)


async def _forward(ctx: RequestContext, admin: ConfigAdmin, count: int) -> list:
    assert admin.forward_to_controller is not None
    try:
        return [await admin.forward_to_controller(ctx)]
    except (KafkaError, OSError) as e:
        log.warning("forwarding %s to the controller failed: %s", ApiKey(ctx.header.api_key).name, e)
        body = _error_body(ctx.header.api_key, count, ErrorCode.request_timed_out, f"controller unreachable: {e}")
        return [encode_response(ctx.header.api_key, ctx.api_version, body)]
