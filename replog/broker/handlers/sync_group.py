"""SyncGroup (key 14), v0-5: the leader hands in the assignment; every member's answer waits for it (and
for the group's record to be replicated)."""

from kio.schema.errors import ErrorCode

from replog.coordinator.outcomes import SyncRequest, SyncResult
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security.acls import Operation, ResourceType
from replog.server.dispatch import RequestContext

from .context import GroupCoordination
from .group_requests import submit


def handle(ctx: RequestContext, groups: GroupCoordination):
    version = ctx.api_version
    request = decode_request(ApiKey.SYNC_GROUP, version, ctx.frame, ctx.body_offset)
    if not groups.access.allows(ctx, Operation.READ, ResourceType.GROUP, request.group_id):
        body = {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed, "protocol_type": None,
                "protocol_name": None, "assignment": b""}
        return [encode_response(ApiKey.SYNC_GROUP, version, body)]
    shell = groups.shell

    def sync(request_id: int):
        return shell.coordinator.sync(SyncRequest(
            request_id, request.group_id, request.generation_id, request.member_id,
            getattr(request, "group_instance_id", None), getattr(request, "protocol_type", None),
            getattr(request, "protocol_name", None),
            tuple((a.member_id, a.assignment) for a in request.assignments)), shell.now_ms)

    return _encode_later(submit(shell, sync), version)


async def _encode_later(future, version: int) -> list:
    result: SyncResult = await future
    body = {"throttle_time": 0, "error_code": result.error, "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name, "assignment": result.assignment}
    return [encode_response(ApiKey.SYNC_GROUP, version, body)]
