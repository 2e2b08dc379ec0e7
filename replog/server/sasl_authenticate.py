"""SaslAuthenticate (key 36), v0-2: one PLAIN token in, the session's principal out.

A failed authentication is answered with SASL_AUTHENTICATION_FAILED and the connection is closed after the
response, as Kafka does.
"""

import asyncio

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response

from .auth import SaslState, authenticate_plain
from .dispatch import CloseConnection, RequestContext


def handle(ctx: RequestContext, inter_broker_secret: str | None) -> list:
    """inter_broker_secret: the password the inter-broker principal authenticates with (None: nobody can)."""
    request = decode_request(ApiKey.SASL_AUTHENTICATE, ctx.api_version, ctx.frame, ctx.body_offset)
    if ctx.session.sasl_state is not SaslState.HANDSHAKE_DONE:
        raise CloseConnection("SaslAuthenticate without a SaslHandshake")
    failure = authenticate_plain(ctx.session, bytes(request.auth_bytes), inter_broker_secret)
    body = {"error_code": ErrorCode.none if failure is None else ErrorCode.sasl_authentication_failed,
            "error_message": failure, "auth_bytes": b"", "session_lifetime": 0}
    response = [encode_response(ApiKey.SASL_AUTHENTICATE, ctx.api_version, body)]
    if failure is not None:
        # Close once the answer is out: a later loop turn, after the connection wrote the response.
        asyncio.get_running_loop().call_soon(ctx.close_connection)
    return response
