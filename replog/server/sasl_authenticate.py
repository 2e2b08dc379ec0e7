"""SaslAuthenticate (key 36), v0-2: one step of the mechanism agreed in SaslHandshake per request, until the
session has its principal.

A failed authentication is answered with SASL_AUTHENTICATION_FAILED and the connection is closed after the
response, as Kafka does. A SaslAuthenticate past authentication (or where SASL is optional) is answered
ILLEGAL_SASL_STATE, as KafkaApis does; before a handshake on a SASL listener it closes the connection. The
last answer of a successful exchange carries session_lifetime_ms (v1+; KIP-368): the listener's
connections.max.reauth.ms for the mechanism, 0 when sessions do not expire. A re-authentication must keep the
mechanism and the principal (reauth.py), else it fails like a wrong password.
"""

import asyncio
import datetime
import time

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response

from .auth import SaslState
from .dispatch import CloseConnection, RequestContext
from .reauth import reauth_refusal
from .sasl import SaslAuthenticationFailed


def handle(ctx: RequestContext) -> list:
    request = decode_request(ApiKey.SASL_AUTHENTICATE, ctx.api_version, ctx.frame, ctx.body_offset)
    session = ctx.session
    if session.sasl_state is not SaslState.HANDSHAKE_DONE or session.exchange is None:
        if session.must_authenticate:  # Kafka's SaslServerAuthenticator: not a request it expects here
            raise CloseConnection("SaslAuthenticate without a SaslHandshake")
        # Past authentication (or where SASL is optional) the request reaches KafkaApis, which answers this.
        body = {"error_code": ErrorCode.illegal_sasl_state, "auth_bytes": b"",
                "error_message": "SaslAuthenticate request received after successful authentication"}
        return [encode_response(ApiKey.SASL_AUTHENTICATE, ctx.api_version, body)]
    try:
        if session.reauthenticating is not None:
            refusal = reauth_refusal(session.reauthenticating, session.mechanism, None)
            if refusal is not None:
                raise SaslAuthenticationFailed(refusal)
        answer, authenticated = session.exchange.step(bytes(request.auth_bytes))
        lifetime_ms = 0 if authenticated is None else session.authenticated(authenticated, time.monotonic())
    except SaslAuthenticationFailed as e:
        body = {"error_code": ErrorCode.sasl_authentication_failed, "error_message": str(e), "auth_bytes": b""}
        # Close once the answer is out: a later loop turn, after the connection wrote the response.
        asyncio.get_running_loop().call_soon(ctx.close_connection)
        return [encode_response(ApiKey.SASL_AUTHENTICATE, ctx.api_version, body)]
    body = {"error_code": ErrorCode.none, "error_message": None, "auth_bytes": answer,
            "session_lifetime": datetime.timedelta(milliseconds=lifetime_ms)}
    return [encode_response(ApiKey.SASL_AUTHENTICATE, ctx.api_version, body)]
