"""AlterUserScramCredentials (key 51), v0 (KIP-554): add, replace or delete users' SCRAM credentials. The
controller decides and keeps them in its metadata log (forwarded, KIP-590, as KRaft brokers forward it), then
sends them to every broker with UpdateMetadata. A single node without a controller has no metadata log: it
refuses, each user with UNSUPPORTED_VERSION, as Kafka answers when its metadata cannot hold SCRAM. Kafka asks
for ALTER on the cluster: without it, every user gets CLUSTER_AUTHORIZATION_FAILED."""

import logging

from kio.schema.errors import ErrorCode

from replog.client.errors import KafkaError
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security.acls import Operation
from replog.server.dispatch import RequestContext

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
    if admin.forward_to_controller is None:
        body = _body(request, ErrorCode.unsupported_version, "SCRAM credentials live in a controller's metadata "
                     "log; this single node has none (use sasl.scram.credentials.file)")
        return [encode_response(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ctx.api_version, body)]
    return _forward(ctx, admin, request)


async def _forward(ctx: RequestContext, admin: ConfigAdmin, request) -> list:
    try:
        return [await admin.forward_to_controller(ctx)]
    except (KafkaError, OSError) as e:
        log.warning("forwarding AlterUserScramCredentials to the controller failed: %s", e)
        body = _body(request, ErrorCode.request_timed_out, f"controller unreachable: {e}")
        return [encode_response(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ctx.api_version, body)]
