"""When a client re-authenticates (KIP-368): a pure rule, the clock and the randomness are arguments.

Kafka's SaslClientAuthenticator re-authenticates after 85% of the session lifetime the broker gave, plus up to
10% more at random so that many connections opened together do not all re-authenticate at once; what is left
covers the network round trips and clock drift. A lifetime of 0 means the session does not expire.
"""

LATENCY_AND_DRIFT_FACTOR = 0.85
JITTER_FACTOR = 0.10


def reauth_delay_s(session_lifetime_ms: int, jitter: float) -> float | None:
    """Seconds after authentication to re-authenticate, None never; jitter is uniform in [0, 1)."""
    assert 0.0 <= jitter < 1.0
    if session_lifetime_ms <= 0:
        return None
    return session_lifetime_ms * (LATENCY_AND_DRIFT_FACTOR + JITTER_FACTOR * jitter) / 1000
