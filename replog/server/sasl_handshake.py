"""SaslHandshake (key 17), v0-1: agree on a SASL mechanism among those the connection's listener offers.

After v1 the tokens come in SaslAuthenticate requests (KIP-152); after v0 they come bare, each size-prefixed
(KIP-43), and the dispatcher hands them to the exchange begun here. A mechanism the listener does not offer
is answered with UNSUPPORTED_SASL_MECHANISM and the list it does offer, then the connection is closed, as
Kafka's SaslServerAuthenticator does. On an authenticated connection a handshake begins re-authentication
(KIP-368, reauth.py; the dispatcher decides) or is answered ILLEGAL_SASL_STATE, as Kafka's KafkaApis does.
"""

import asyncio

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response

from .auth import SaslState
from .dispatch import CloseConnection, RequestContext


def handle(ctx: RequestContext, inter_broker_secret: str | None) -> list:
    """inter_broker_secret: the password the inter-broker principal authenticates with (None: nobody can)."""
    request = decode_request(ApiKey.SASL_HANDSHAKE, ctx.api_version, ctx.frame, ctx.body_offset)
    session = ctx.session
    offered = list(session.sasl.mechanisms)
    if session.sasl_state is SaslState.AUTHENTICATED:  # not a re-authentication (see dispatch._check_session)
        body = {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": offered}
        return [encode_response(ApiKey.SASL_HANDSHAKE, ctx.api_version, body)]
    assert session.sasl_state is SaslState.NONE  # the dispatcher lets only SaslAuthenticate follow a handshake
    if session.reauthenticating is not None and ctx.api_version == 0:
        # KIP-368 clients re-authenticate with SaslAuthenticate; bare v0 tokens cannot carry a session lifetime.
        raise CloseConnection("re-authentication with SaslHandshake v0")
    if request.mechanism in offered:
        error = ErrorCode.none
        session.sasl_state = SaslState.HANDSHAKE_DONE
        session.exchange = session.sasl.exchange(request.mechanism, inter_broker_secret)
        session.raw_tokens = ctx.api_version == 0
        # On re-authentication a different mechanism fails in SaslAuthenticate (Kafka's REAUTH_BAD_MECHANISM).
        session.mechanism = request.mechanism
    else:
        error = ErrorCode.unsupported_sasl_mechanism
        asyncio.get_running_loop().call_soon(ctx.close_connection)  # once the answer is out
    body = {"error_code": error, "mechanisms": offered}
    return [encode_response(ApiKey.SASL_HANDSHAKE, ctx.api_version, body)]
