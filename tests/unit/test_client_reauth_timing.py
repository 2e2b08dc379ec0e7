"""Table test of when the bundled client re-authenticates (KIP-368): 85% to 95% into the session lifetime."""

import pytest

from replog.client.reauth_timing import reauth_delay_s


@pytest.mark.parametrize(("lifetime_ms", "jitter", "expected"), [
    (0, 0.5, None),  # the broker gave no lifetime: never
    (-1, 0.5, None),
    (10_000, 0.0, 8.5),
    (10_000, 0.5, 9.0),
    (10_000, 0.999, 9.499),
])
def test_reauth_delay(lifetime_ms, jitter, expected):
    assert reauth_delay_s(lifetime_ms, jitter) == pytest.approx(expected)
