"""SaslAuthenticate (key 36), v0-2: one step of the mechanism agreed in SaslHandshake per request, until the
session has its principal.

A failed authentication is answered with SASL_AUTHENTICATION_FAILED and the connection is closed after the
response, as Kafka does. No re-authentication (KIP-368): session_lifetime_ms is 0.
"""

import asyncio

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response

from .auth import SaslState
from .dispatch import CloseConnection, RequestContext
from .sasl import SaslAuthenticationFailed


def handle(ctx: RequestContext) -> list:
    request = decode_request(ApiKey.SASL_AUTHENTICATE, ctx.api_version, ctx.frame, ctx.body_offset)
    session = ctx.session
    if session.sasl_state is not SaslState.HANDSHAKE_DONE or session.exchange is None:
        raise CloseConnection("SaslAuthenticate without a SaslHandshake")
    try:
        answer, authenticated = session.exchange.step(bytes(request.auth_bytes))
    except SaslAuthenticationFailed as e:
        body = {"error_code": ErrorCode.sasl_authentication_failed, "error_message": str(e), "auth_bytes": b"",
                "session_lifetime": 0}
        # Close once the answer is out: a later loop turn, after the connection wrote the response.
        asyncio.get_running_loop().call_soon(ctx.close_connection)
        return [encode_response(ApiKey.SASL_AUTHENTICATE, ctx.api_version, body)]
    if authenticated is not None:
        session.authenticated(authenticated)
    body = {"error_code": ErrorCode.none, "error_message": None, "auth_bytes": answer, "session_lifetime": 0}
    return [encode_response(ApiKey.SASL_AUTHENTICATE, ctx.api_version, body)]
