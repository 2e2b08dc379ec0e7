"""Turns a request frame into a framed response: header checks, version gate, handler registry lookup.

Handlers return the response body as a list of parts, an awaitable of that list (delayed operations), or
None when no response is sent (acks=0). Anything malformed raises CloseConnection, as Kafka closes the
connection on a request it cannot parse.
"""

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from replog.protocol.apis import SUPPORTED_APIS, ApiKey, ApiSpec, response_header_version
from replog.protocol.fetch import RecordsPart, part_length
from replog.protocol.frames import size_prefix
from replog.protocol.headers import (
    RequestHeader,
    decode_request_header,
    encode_response_header,
    peek_request_ids,
)
from replog.protocol.primitives import DecodeError

from .auth import SaslState, Session, client_host
from .completion import Completion
from .reauth import Verdict, on_authenticated_request
from .sasl import SaslAuthenticationFailed

log = logging.getLogger(__name__)

Body = list[RecordsPart]
HandlerResult = Body | Completion | Awaitable[Body | None] | None


_BEFORE_AUTHENTICATION = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


class CloseConnection(Exception):
    """The request cannot be answered; the connection is closed."""


class SessionExpired(CloseConnection):
    """A request on a connection whose SASL session has ended (KIP-368); counted, then closed."""


@dataclass(slots=True)
class RequestContext:
    header: RequestHeader
    frame: bytearray
    peer: str
    close_connection: Callable[[], None]
    session: Session

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def body_offset(self) -> int:
        return self.header.body_offset

    @property
    def may_act_for_cluster(self) -> bool:
        """CLUSTER_ACTION on the cluster, which what only nodes send needs (replication, LeaderAndIsr,
        registration, forwarded admin requests): a node principal, or an ACL allowing it (server/auth.py)."""
        session = self.session
        return session.cluster_action or session.members.grants_cluster_action(session.principal,
                                                                                client_host(self.peer))


Handler = Callable[[RequestContext], HandlerResult]


# Told of each answered request: (api key, ms in the handler itself, ms until the response was ready).
RequestObserver = Callable[[int, float, float], None]


class Dispatcher:
    def __init__(self, handlers: dict[int, Handler], unsupported_api_versions: Callable[[], Body],
                 observe_request: RequestObserver | None = None,
                 api_specs: Mapping[int, ApiSpec] = SUPPORTED_APIS) -> None:
        """api_specs: the version ranges this server accepts (a controller's Fetch differs from a broker's)."""
        assert set(handlers) <= set(api_specs)
        self._handlers = handlers
        self._api_specs = api_specs
        # One lookup per request: each API this server answers, with its version range and its handler.
        self._routes: dict[int, tuple[ApiSpec, Handler]] = {key: (api_specs[key], handler)
                                                             for key, handler in handlers.items()}
        self._unsupported_api_versions = unsupported_api_versions
        self._observe_request = observe_request

    def dispatch(self, frame: bytearray, peer: str, close: Callable[[], None], session: Session) -> Any:
        """Framed response parts, an awaitable of them, or None."""
        if session.raw_tokens:
            return _raw_sasl_token(frame, session)
        try:
            api_key, api_version, correlation_id = peek_request_ids(frame)
        except DecodeError as e:
            raise CloseConnection(str(e)) from e
        route = self._routes.get(api_key)
        if route is None:
            raise CloseConnection(f"unknown API key {api_key}")
        spec, handler = route
        if not spec.supports(api_version):
            if api_key == ApiKey.API_VERSIONS:
                # KIP-511: answer with a v0-encoded body carrying UNSUPPORTED_VERSION and our versions.
                return frame_response(correlation_id, 0, self._unsupported_api_versions())
            raise CloseConnection(f"unsupported version {api_version} of API {api_key}")
        if session.sasl_state is SaslState.AUTHENTICATED:
            _check_session(session, api_key)
        if session.sasl_state is SaslState.HANDSHAKE_DONE and api_key != ApiKey.SASL_AUTHENTICATE:
            # KIP-152: after SaslHandshake v1 the only legal next request is SaslAuthenticate.
            raise CloseConnection(f"API key {api_key} sent between SaslHandshake and SaslAuthenticate")
        if session.must_authenticate and api_key not in _BEFORE_AUTHENTICATION:
            # As Kafka's SaslServerAuthenticator: any other request before authentication ends the connection.
            raise CloseConnection(f"API key {api_key} sent before SASL authentication")
        try:
            header = decode_request_header(frame)
        except DecodeError as e:
            raise CloseConnection(f"malformed request header: {e}") from e
        started = time.perf_counter()
        try:
            result = handler(RequestContext(header, frame, peer, close, session))
        except DecodeError as e:
            raise CloseConnection(f"malformed {ApiKey(api_key).name} v{api_version}: {e}") from e
        local_ms = (time.perf_counter() - started) * 1000
        header_version = response_header_version(api_key, api_version)
        if result is None or type(result) is list:
            if self._observe_request is not None:
                self._observe_request(api_key, local_ms, local_ms)
            return None if result is None else frame_response(correlation_id, header_version, result)
        if isinstance(result, Completion):
            # Framed in the call that completes it, not by a task that wakes a loop turn later (completion.py).
            return result.then(functools.partial(self._framed, api_key, correlation_id, header_version, started,
                                                 local_ms))
        return self._framed_later(result, api_key, correlation_id, header_version, started, local_ms)

    def _framed(self, api_key: int, correlation_id: int, header_version: int, started: float, local_ms: float,
                body: Body | None) -> Body | None:
        if self._observe_request is not None:
            self._observe_request(api_key, local_ms, (time.perf_counter() - started) * 1000)
        return None if body is None else frame_response(correlation_id, header_version, body)

    async def _framed_later(self, result: Awaitable[Body | None], api_key: int, correlation_id: int,
                            header_version: int, started: float, local_ms: float):
        try:
            body = await result
        except DecodeError as e:  # an async handler decodes its body only once awaited
            raise CloseConnection(f"malformed {ApiKey(api_key).name}: {e}") from e
        return self._framed(api_key, correlation_id, header_version, started, local_ms, body)

def _check_session(session: Session, api_key: int) -> None:
    """KIP-368 on an authenticated connection: close it once its session has expired, unless the request is a
    SaslHandshake that begins re-authentication (a refused one is answered ILLEGAL_SASL_STATE by its handler)."""
    is_handshake = api_key == ApiKey.SASL_HANDSHAKE
    if session.expires_at is None and not is_handshake:
        return  # the common case: no session lifetime
    now = time.monotonic()
    verdict = on_authenticated_request(is_handshake=is_handshake, expires_at=session.expires_at,
                                       last_reauth_start=session.last_reauth_start, now=now)
    if verdict is Verdict.CLOSE_EXPIRED:
        raise SessionExpired(f"SASL session of {session.principal} expired: no re-authentication within "
                              f"connections.max.reauth.ms (KIP-368)")
    if verdict is Verdict.REAUTHENTICATE:
        session.begin_reauthentication(now)


def _raw_sasl_token(frame: bytearray, session: Session) -> Body:
    """After SaslHandshake v0 (KIP-43) a frame is a bare SASL token and the answer is the server's token,
    size-prefixed; v0 has no error field, so a failed authentication closes the connection, as Kafka does."""
    try:
        answer, authenticated = session.exchange.step(bytes(frame))
        if authenticated is not None:
            session.authenticated(authenticated, time.monotonic())  # v0 clients learn no lifetime (KIP-368)
    except SaslAuthenticationFailed as e:
        raise CloseConnection(f"SASL authentication failed: {e}") from e
    return [size_prefix(len(answer)) + answer]


def frame_response(correlation_id: int, header_version: int, body: Body) -> Body:
    """The size prefix and response header, joined to the body's first part when that is bytes (every answer
    but a fetch's record slices): the writer queues, measures and sends one part less per answer, and an
    answer of one part (a produce's) goes out as one buffer."""
    head = encode_response_header(correlation_id, header_version)
    if len(body) == 1 and type(body[0]) is bytes:
        return [size_prefix(len(head) + len(body[0])) + head + body[0]]
    size = len(head) + sum(part_length(p) for p in body)
    if body and type(body[0]) is bytes:
        return [size_prefix(size) + head + body[0], *body[1:]]
    return [size_prefix(size) + head, *body]


def is_awaitable(value: Any) -> bool:
    return isinstance(value, Completion) or asyncio.isfuture(value) or asyncio.iscoroutine(value)
