"""ListGroups (key 16), v0-5: the groups this broker coordinates; v4+ filter by state (KIP-518), v5+ by
type (KIP-848: only the classic type exists here)."""

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security.acls import Operation, ResourceType
from replog.server.dispatch import RequestContext

from .context import GroupCoordination

CLASSIC = "classic"


def handle(ctx: RequestContext, groups: GroupCoordination):
    version = ctx.api_version
    request = decode_request(ApiKey.LIST_GROUPS, version, ctx.frame, ctx.body_offset)
    states = getattr(request, "states_filter", ())
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    listed = [] if types and CLASSIC not in types else groups.shell.coordinator.list_groups(states)
    if not groups.access.allows_cluster(ctx, Operation.DESCRIBE):  # else only the groups it may DESCRIBE
        visible = groups.access.allowed(ctx, Operation.DESCRIBE, ResourceType.GROUP, (g.group_id for g in listed))
        listed = [g for g in listed if g.group_id in visible]
    body = {"throttle_time": 0, "error_code": ErrorCode.none,
            "groups": [{"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state,
                        "group_type": CLASSIC} for g in listed]}
    return [encode_response(ApiKey.LIST_GROUPS, version, body)]
