"""SaslHandshake (key 17), v1: agree on a SASL mechanism; only PLAIN is offered (see auth.py).

v0 (raw SASL tokens outside Kafka framing) is not offered, so clients always follow with SaslAuthenticate.
"""

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response

from .auth import PLAIN, SaslState
from .dispatch import CloseConnection, RequestContext


def handle(ctx: RequestContext) -> list:
    request = decode_request(ApiKey.SASL_HANDSHAKE, ctx.api_version, ctx.frame, ctx.body_offset)
    if ctx.session.sasl_state is not SaslState.NONE:
        raise CloseConnection("SaslHandshake repeated on an authenticated connection")
    if request.mechanism != PLAIN:
        error = ErrorCode.unsupported_sasl_mechanism
    else:
        error = ErrorCode.none
        ctx.session.sasl_state = SaslState.HANDSHAKE_DONE
    body = {"error_code": error, "mechanisms": [PLAIN]}
    return [encode_response(ApiKey.SASL_HANDSHAKE, ctx.api_version, body)]
