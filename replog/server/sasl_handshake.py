"""SaslHandshake (key 17), v1: agree on a SASL mechanism among those the connection's listener offers.

v0 (raw SASL tokens outside Kafka framing) is not offered, so clients always follow with SaslAuthenticate
(KIP-152). A mechanism the listener does not offer is answered with UNSUPPORTED_SASL_MECHANISM and the list it
does offer, then the connection is closed, as Kafka's SaslServerAuthenticator does.
"""

import asyncio

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response

from .auth import SaslState
from .dispatch import CloseConnection, RequestContext


def handle(ctx: RequestContext) -> list:
    request = decode_request(ApiKey.SASL_HANDSHAKE, ctx.api_version, ctx.frame, ctx.body_offset)
    session = ctx.session
    if session.sasl_state is not SaslState.NONE:
        raise CloseConnection("SaslHandshake repeated on an authenticated connection")
    offered = list(session.sasl.mechanisms)
    if request.mechanism in offered:
        error = ErrorCode.none
        session.sasl_state = SaslState.HANDSHAKE_DONE
        session.exchange = None
        session.mechanism = request.mechanism
    else:
        error = ErrorCode.unsupported_sasl_mechanism
        asyncio.get_running_loop().call_soon(ctx.close_connection)  # once the answer is out
    body = {"error_code": error, "mechanisms": offered}
    return [encode_response(ApiKey.SASL_HANDSHAKE, ctx.api_version, body)]
