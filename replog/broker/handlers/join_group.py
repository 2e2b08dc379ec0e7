"""JoinGroup (key 11), v0-9: a member joins or rejoins; the answer waits for the rebalance to complete.

v0 has no rebalance timeout (the session timeout serves, as in Kafka); v4+ (KIP-394) makes a new member
rejoin with the member id it is given (MEMBER_ID_REQUIRED); v5+ carry group.instance.id (KIP-345); v9
lets a static leader skip computing the assignment (KIP-814).
"""

import uuid

from kio.schema.errors import ErrorCode

from replog.coordinator.outcomes import JoinRequest, JoinResult
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response, millis
from replog.security.acls import Operation, ResourceType
from replog.server.dispatch import RequestContext

from .context import GroupCoordination
from .group_requests import client_host, submit


def handle(ctx: RequestContext, groups: GroupCoordination):
    version = ctx.api_version
    request = decode_request(ApiKey.JOIN_GROUP, version, ctx.frame, ctx.body_offset)
    if not groups.access.allows(ctx, Operation.READ, ResourceType.GROUP, request.group_id):
        empty = None if version >= 7 else ""
        body = {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed, "generation_id": -1,
                "protocol_type": empty, "protocol_name": empty, "leader": "", "skip_assignment": False,
                "member_id": request.member_id, "members": []}
        return [encode_response(ApiKey.JOIN_GROUP, version, body)]
    session_ms = millis(request.session_timeout)
    shell = groups.shell

    def join(request_id: int):
        return shell.coordinator.join(JoinRequest(
            request_id, request.group_id, request.member_id, getattr(request, "group_instance_id", None),
            ctx.header.client_id or "", client_host(ctx), session_ms,
            millis(request.rebalance_timeout) if version >= 1 else session_ms, request.protocol_type,
            tuple((p.name, p.metadata) for p in request.protocols),
            require_known_member_id=version >= 4, support_skipping_assignment=version >= 9),
            shell.now_ms, str(uuid.uuid4()))

    return _encode_later(submit(shell, join), version)


async def _encode_later(future, version: int) -> list:
    result: JoinResult = await future
    body = {
        "throttle_time": 0, "error_code": result.error, "generation_id": result.generation_id,
        # Nullable from v7 only: older versions get "" for "none yet".
        "protocol_type": result.protocol_type if version >= 7 else result.protocol_type or "",
        "protocol_name": result.protocol_name if version >= 7 else result.protocol_name or "",
        "leader": result.leader_id, "skip_assignment": result.skip_assignment, "member_id": result.member_id,
        "members": [{"member_id": m, "group_instance_id": instance, "metadata": metadata}
                    for m, instance, metadata in result.members],
    }
    return [encode_response(ApiKey.JOIN_GROUP, version, body)]
