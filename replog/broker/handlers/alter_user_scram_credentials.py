"""AlterUserScramCredentials (key 51), v0 (KIP-554): add, replace or delete users' SCRAM credentials. The
controller decides and keeps them in its metadata log (forwarded, KIP-590, as KRaft brokers forward it), then
sends them to every broker with UpdateMetadata. A single node without a controller decides with the same rules
and keeps them in its state file (local_controller.py), as it keeps topics and ACLs. Kafka asks for ALTER on
the cluster: without it, every user gets CLUSTER_AUTHORIZATION_FAILED."""

import logging

from kio.schema.errors import ErrorCode

from replog.client.errors import KafkaError
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security.acls import Operation
from replog.server.dispatch import RequestContext
from replog.server.scram_credentials import changes_of_request

from .context import ConfigAdmin

log = logging.getLogger(__name__)


def _body(request, error: ErrorCode, message: str) -> dict:
    users = dict.fromkeys(c.name for c in (*request.deletions, *request.upsertions))
    return {"throttle_time": 0, "results": [{"user": user, "error_code": error, "error_message": message}
                                            for user in users]}


def handle(ctx: RequestContext, admin: ConfigAdmin):
    request = decode_request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ctx.api_version, ctx.frame, ctx.body_offset)
    if not admin.access.allows_cluster(ctx, Operation.ALTER):
        body = _body(request, ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
        return [encode_response(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ctx.api_version, body)]
    if admin.forward_to_controller is not None:
        return _forward(ctx, admin, request)
    results = admin.local.alter_scram_credentials(*changes_of_request(request))
    body = {"throttle_time": 0, "results": [{"user": r.user, "error_code": r.error_code,
                                             "error_message": r.error_message} for r in results]}
    return [encode_response(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ctx.api_version, body)]


async def _forward(ctx: RequestContext, admin: ConfigAdmin, request) -> list:
    try:
        return [await admin.forward_to_controller(ctx)]
    except (KafkaError, OSError) as e:
        log.warning("forwarding AlterUserScramCredentials to the controller failed: %s", e)
        body = _body(request, ErrorCode.request_timed_out, f"controller unreachable: {e}")
        return [encode_response(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ctx.api_version, body)]
