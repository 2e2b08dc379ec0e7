"""LeaveGroup (key 13), v0-5: v0-2 one member leaves; v3+ a batch, possibly by group.instance.id alone
(KIP-345: an admin removing static members)."""

from kio.schema.errors import ErrorCode

from replog.coordinator.outcomes import LeaveRequest, LeavingMember
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security.acls import Operation, ResourceType
from replog.server.dispatch import RequestContext

from .context import GroupCoordination
from .group_requests import submit


def handle(ctx: RequestContext, groups: GroupCoordination):
    version = ctx.api_version
    request = decode_request(ApiKey.LEAVE_GROUP, version, ctx.frame, ctx.body_offset)
    if version >= 3:
        members = tuple(LeavingMember(m.member_id, m.group_instance_id) for m in request.members)
    else:
        members = (LeavingMember(request.member_id),)
    if not groups.access.allows(ctx, Operation.READ, ResourceType.GROUP, request.group_id):
        return [encode_response(ApiKey.LEAVE_GROUP, version, {
            "throttle_time": 0, "error_code": ErrorCode.group_authorization_failed, "members": []})]
    shell = groups.shell
    future = submit(shell, lambda request_id: shell.coordinator.leave(
        LeaveRequest(request_id, request.group_id, members), shell.now_ms))
    assert future.done()  # a leave is answered at once
    result = future.result()
    error = result.error
    if version < 3 and error == ErrorCode.none and result.members:
        error = result.members[0][1]  # one member, one error, at the top level before batching
    body = {"throttle_time": 0, "error_code": error,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "error_code": e}
                        for m, e in result.members]}
    return [encode_response(ApiKey.LEAVE_GROUP, version, body)]
