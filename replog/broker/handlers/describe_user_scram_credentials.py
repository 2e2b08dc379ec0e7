"""DescribeUserScramCredentials (key 50), v0 (KIP-554): which SCRAM mechanisms each user has, and with how many
iterations, answered from this broker's copy of the metadata log's credentials (as KRaft brokers answer from
their ScramImage). Salts and keys are never shown. Kafka asks for DESCRIBE on the cluster: without it, the
answer is CLUSTER_AUTHORIZATION_FAILED and no user."""

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security.acls import Operation
from replog.server.dispatch import RequestContext
from replog.server.scram_credentials import describe

from .context import ConfigAdmin


def handle(ctx: RequestContext, admin: ConfigAdmin) -> list:
    request = decode_request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ctx.api_version, ctx.frame, ctx.body_offset)
    if not admin.access.allows_cluster(ctx, Operation.DESCRIBE):
        body = {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed,
                "error_message": "Cluster authorization failed.", "results": []}
        return [encode_response(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ctx.api_version, body)]
    users = None if request.users is None else [u.name for u in request.users]
    results = [{"user": result.user, "error_code": result.error_code, "error_message": result.error_message,
                "credential_infos": [{"mechanism": mechanism, "iterations": iterations}
                                     for mechanism, iterations in infos]}
               for result, infos in describe(admin.image.scram, users)]
    body = {"throttle_time": 0, "error_code": 0, "error_message": None, "results": results}
    return [encode_response(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ctx.api_version, body)]
