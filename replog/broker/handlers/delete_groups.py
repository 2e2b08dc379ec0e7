"""DeleteGroups (key 42), v0-2: an Empty group goes, with its offsets (tombstones in __consumer_offsets);
a group with members gets NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND."""

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security.acls import Operation, ResourceType
from replog.server.dispatch import RequestContext

from .context import GroupCoordination


def handle(ctx: RequestContext, groups: GroupCoordination):
    request = decode_request(ApiKey.DELETE_GROUPS, ctx.api_version, ctx.frame, ctx.body_offset)
    shell = groups.shell
    results = []
    deletable = groups.access.allowed(ctx, Operation.DELETE, ResourceType.GROUP, request.groups_names)
    for group_id in dict.fromkeys(request.groups_names):  # a group named twice is deleted once
        if group_id not in deletable:
            results.append({"group_id": group_id, "error_code": ErrorCode.group_authorization_failed})
            continue
        error, out = shell.coordinator.delete_group(group_id, shell.now_ms)
        shell.apply(out)
        results.append({"group_id": group_id, "error_code": error})
    return [encode_response(ApiKey.DELETE_GROUPS, ctx.api_version, {"throttle_time": 0, "results": results})]
