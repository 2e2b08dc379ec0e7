"""SASL re-authentication (KIP-368) on the server, as pure rules: no I/O, no asyncio; the clock is an argument.

With `connections.max.reauth.ms` > 0 a SASL session has a lifetime, told to the client in SaslAuthenticate v1+
(session_lifetime_ms). Before it ends the client re-authenticates on the same connection: SaslHandshake, then
SaslAuthenticate, as the first time. A connection whose session has expired is closed on its next request
unless that request is a SaslHandshake that begins re-authentication (Kafka's Processor checks
`serverAuthenticationSessionExpired` on each receive). Re-authentication keeps the mechanism and the principal
(SaslServerAuthenticator.ReauthInfo), and begins at most once a second (KafkaChannel.MIN_REAUTH_INTERVAL);
a SaslHandshake that may not begin one is answered ILLEGAL_SASL_STATE, as KafkaApis answers a handshake on an
authenticated connection. The key may be set per listener and per mechanism, as Kafka allows:
`listener.name.<listener>.<mechanism>.connections.max.reauth.ms`, lower case.
"""

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MAX_REAUTH_KEY = "connections.max.reauth.ms"
MIN_REAUTH_INTERVAL_S = 1.0


class Verdict(enum.Enum):
    SERVE = "serve"  # handle the request as usual
    REAUTHENTICATE = "reauthenticate"  # a SaslHandshake that begins re-authentication
    REFUSE_HANDSHAKE = "refuse_handshake"  # a SaslHandshake answered ILLEGAL_SASL_STATE
    CLOSE_EXPIRED = "close_expired"  # the session has expired: close the connection without an answer


def on_authenticated_request(*, is_handshake: bool, expires_at: float | None, last_reauth_start: float | None,
                             now: float) -> Verdict:
    """What to do with a request on an authenticated connection (times in seconds on one monotonic clock).

    expires_at: when the session ends (None: it does not); last_reauth_start: when this connection last began
    re-authenticating (None: never)."""
    may_begin = last_reauth_start is None or now - last_reauth_start >= MIN_REAUTH_INTERVAL_S
    if is_handshake and expires_at is not None and may_begin:
        return Verdict.REAUTHENTICATE
    if expires_at is not None and now > expires_at:
        return Verdict.CLOSE_EXPIRED
    return Verdict.REFUSE_HANDSHAKE if is_handshake else Verdict.SERVE


def session_expiry(max_reauth_ms: int, now: float) -> tuple[int, float | None]:
    """(session_lifetime_ms told to the client, when the session expires) for an authentication completed now.
    replog has no delegation tokens, so no credential of its own expires: the lifetime is the configured one."""
    if max_reauth_ms <= 0:
        return 0, None
    return max_reauth_ms, now + max_reauth_ms / 1000


@dataclass(frozen=True)
class Identity:
    """Who authenticated, and how: what re-authentication must keep."""

    principal: str
    mechanism: str


def reauth_refusal(previous: Identity, mechanism: str, principal: str | None) -> str | None:
    """Why re-authentication as `principal` (None: not known yet) with `mechanism` is refused, or None.
    The messages are Kafka's."""
    if mechanism != previous.mechanism:
        return (f"SASL mechanism '{mechanism}' requested by client is not supported for re-authentication of "
                f"mechanism '{previous.mechanism}'")
    if principal is not None and principal != previous.principal:
        return f"Cannot change principals during re-authentication from {previous.principal}: {principal}"
    return None


def max_reauth_ms_by_mechanism(props: Mapping[str, str], listener_name: str,
                               mechanisms: Iterable[str]) -> dict[str, int]:
    """connections.max.reauth.ms for each mechanism of a listener, the most specific key winning:
    listener.name.<l>.<mechanism>., then listener.name.<l>., then the bare key; default 0 (off).
    ValueError names the key with a value that is not a whole number of milliseconds >= 0."""
    listener_prefix = f"listener.name.{listener_name.lower()}."
    result = {}
    for mechanism in mechanisms:
        for key in (f"{listener_prefix}{mechanism.lower()}.{MAX_REAUTH_KEY}", f"{listener_prefix}{MAX_REAUTH_KEY}",
                    MAX_REAUTH_KEY):
            if key in props:
                result[mechanism] = _parse_ms(key, props[key])
                break
        else:
            result[mechanism] = 0
    return result


def _parse_ms(key: str, value: str) -> int:
    try:
        ms = int(value.strip())
    except ValueError:
        raise ValueError(f"{key}={value!r} is not a whole number of milliseconds") from None
    if ms < 0:
        raise ValueError(f"{key}={value!r} must be 0 (off) or more")
    return ms
