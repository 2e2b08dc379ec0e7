"""A fixed-bucket latency histogram: one bisect and two additions per observation, cheap enough for every
request. Buckets in ms, as Kafka reports request times (RequestMetrics TotalTimeMs and friends)."""

import bisect
from itertools import accumulate

from prometheus_client.utils import floatToGoString

BUCKET_BOUNDS_MS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)


class LatencyHistogram:
    __slots__ = ("_counts", "count", "sum_ms")

    def __init__(self) -> None:
        self._counts = [0] * (len(BUCKET_BOUNDS_MS) + 1)  # the last one is +Inf
        self.count = 0
        self.sum_ms = 0.0

    def observe(self, ms: float) -> None:
        self._counts[bisect.bisect_left(BUCKET_BOUNDS_MS, ms)] += 1
        self.count += 1
        self.sum_ms += ms

    def cumulative_buckets(self) -> list[tuple[str, int]]:
        """Prometheus `le` buckets: (upper bound, observations at or below it), ending with +Inf."""
        bounds = [floatToGoString(b) for b in BUCKET_BOUNDS_MS] + ["+Inf"]
        return list(zip(bounds, accumulate(self._counts), strict=True))
