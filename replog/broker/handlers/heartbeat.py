"""Heartbeat (key 12), v0-4: a member is alive; the answer says REBALANCE_IN_PROGRESS when it must rejoin."""

from kio.schema.errors import ErrorCode

from replog.coordinator.outcomes import HeartbeatRequest
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security.acls import Operation, ResourceType
from replog.server.dispatch import RequestContext

from .context import GroupCoordination
from .group_requests import submit


def handle(ctx: RequestContext, groups: GroupCoordination):
    version = ctx.api_version
    request = decode_request(ApiKey.HEARTBEAT, version, ctx.frame, ctx.body_offset)
    if not groups.access.allows(ctx, Operation.READ, ResourceType.GROUP, request.group_id):
        return [encode_response(ApiKey.HEARTBEAT, version,
                                {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed})]
    shell = groups.shell
    future = submit(shell, lambda request_id: shell.coordinator.heartbeat(HeartbeatRequest(
        request_id, request.group_id, request.generation_id, request.member_id,
        getattr(request, "group_instance_id", None)), shell.now_ms))
    assert future.done()  # a heartbeat is always answered at once
    body = {"throttle_time": 0, "error_code": future.result().error}
    return [encode_response(ApiKey.HEARTBEAT, version, body)]
