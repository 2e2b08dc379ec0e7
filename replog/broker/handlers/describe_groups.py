"""DescribeGroups (key 15), v0-5: state, protocol and members of each group; an unknown group is described
as Dead with no members (Kafka before v6)."""

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security.acls import Operation, ResourceType
from replog.server.dispatch import RequestContext

from ..access import OPERATIONS_NOT_REQUESTED
from .context import GroupCoordination

# KIP-430: -2^31 means "not asked for"; replog has no authorizer, so nothing more is ever reported.


def handle(ctx: RequestContext, groups: GroupCoordination):
    version = ctx.api_version
    request = decode_request(ApiKey.DESCRIBE_GROUPS, version, ctx.frame, ctx.body_offset)
    described = []
    describable = groups.access.allowed(ctx, Operation.DESCRIBE, ResourceType.GROUP, request.groups)
    for group_id in request.groups:
        if group_id not in describable:
            described.append({"error_code": ErrorCode.group_authorization_failed, "group_id": group_id,
                              "group_state": "", "protocol_type": "", "protocol_data": "",
                              "authorized_operations": OPERATIONS_NOT_REQUESTED, "members": []})
            continue
        s = groups.shell.coordinator.describe_group(group_id)
        authorized = (groups.access.authorized_operations(ctx, ResourceType.GROUP, group_id)
                      if getattr(request, "include_authorized_operations", False) else OPERATIONS_NOT_REQUESTED)
        described.append({
            "error_code": s.error, "group_id": s.group_id, "group_state": s.state, "protocol_type": s.protocol_type,
            "protocol_data": s.protocol, "authorized_operations": authorized,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "client_host": m.client_host, "member_metadata": m.metadata,
                         "member_assignment": m.assignment} for m in s.members]})
    return [encode_response(ApiKey.DESCRIBE_GROUPS, version, {"throttle_time": 0, "groups": described})]
