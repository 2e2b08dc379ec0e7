"""Replication throttles (KIP-73): Kafka's ReplicationQuotaManager, one for the leader side and one for the
follower side of a broker.

A quota has a rate (the broker's dynamic `leader.replication.throttled.rate` or
`follower.replication.throttled.rate`, bytes/s; none: unlimited) and the partitions it applies to (this broker's
entries in the topics' `leader/follower.replication.throttled.replicas`, "P:B,P:B" or "*"). Bytes of throttled
partitions are recorded; while their rate is over the bound, a throttled partition is left out: the leader
returns no data for it to a follower that is not in sync, the follower does not fetch it until it is in sync.
Other partitions are never held back.

The rate is measured as Kafka's Rate: bytes over `windows` windows of `window_ms`, divided by the time they
span, counted as at least windows - 1 whole windows (so a quiet quota lets a burst of up to that many seconds
of traffic through, as Kafka's does).
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass

ALL_REPLICAS = "*"
DEFAULT_WINDOWS = 11  # replication.quota.window.num
DEFAULT_WINDOW_MS = 1_000  # replication.quota.window.size.seconds = 1


def throttled_partitions(value: str, broker_id: int) -> frozenset[int] | str:
    """This broker's partitions in a throttled-replicas config: "0:1,1:2" on broker 1 -> {0}; "*" -> all."""
    value = value.strip()
    if value == ALL_REPLICAS:
        return ALL_REPLICAS
    partitions = set()
    for item in filter(None, (i.strip() for i in value.split(","))):
        partition, _, broker = item.partition(":")
        if int(broker) == broker_id:
            partitions.add(int(partition))
    return frozenset(partitions)


@dataclass(slots=True)
class _Sample:
    start_ms: int
    bytes: int = 0


class ReplicationQuota:
    def __init__(self, clock_ms: Callable[[], int], *, windows: int = DEFAULT_WINDOWS,
                 window_ms: int = DEFAULT_WINDOW_MS) -> None:
        assert windows >= 2 and window_ms > 0
        self._clock_ms = clock_ms
        self._windows = windows
        self._window_ms = window_ms
        self._samples: list[_Sample] = []  # oldest first, at most `windows`
        self.bound: int | None = None  # bytes/s; None: unlimited
        self._throttled: dict[str, frozenset[int] | str] = {}

    def configure(self, bound: int | None, topic_configs: Mapping[str, Mapping[str, str]], key: str,
                  broker_id: int) -> None:
        """The rate and, from each topic's `key` config, the partitions of this broker it applies to."""
        assert bound is None or bound > 0
        self.bound = bound
        self._throttled = {}
        for topic, configs in topic_configs.items():
            value = configs.get(key)
            if value:
                partitions = throttled_partitions(value, broker_id)
                if partitions:
                    self._throttled[topic] = partitions

    def is_throttled(self, topic: str, partition: int) -> bool:
        partitions = self._throttled.get(topic)
        return partitions is not None and (partitions == ALL_REPLICAS or partition in partitions)

    def throttles(self, topic: str, partition: int, *, in_sync: bool) -> bool:
        """Kafka's shouldLeaderThrottle / shouldFollowerThrottle: hold back this replica's replication now?
        Only a throttled partition, for a replica not in sync, while over the rate."""
        return not in_sync and self.is_throttled(topic, partition) and self.is_quota_exceeded()

    def record_if_throttled(self, topic: str, partition: int, nbytes: int) -> None:
        if self.is_throttled(topic, partition):
            self.record(nbytes)

    def is_quota_exceeded(self) -> bool:
        return self.bound is not None and self.rate() > self.bound

    def record(self, nbytes: int) -> None:
        now = self._clock_ms()
        self._expire(now)
        if not self._samples or now - self._samples[-1].start_ms >= self._window_ms:
            self._samples.append(_Sample(now))
            del self._samples[:-self._windows]
        self._samples[-1].bytes += nbytes

    def rate(self) -> float:
        """Bytes per second over the retained windows."""
        now = self._clock_ms()
        self._expire(now)
        if not self._samples:
            return 0.0
        elapsed = now - self._samples[0].start_ms
        full_windows = elapsed // self._window_ms
        if full_windows < self._windows - 1:
            elapsed += (self._windows - 1 - full_windows) * self._window_ms
        return sum(s.bytes for s in self._samples) * 1000 / elapsed

    def ms_until_under(self) -> int:
        """How long, with no more bytes recorded, until the rate is back at the bound (0 when it is)."""
        if not self.is_quota_exceeded():
            return 0
        # Over the bound, the span needed (bytes / bound) is past the padding, so the real span counts; old
        # windows expiring meanwhile can only make it sooner.
        elapsed = self._clock_ms() - self._samples[0].start_ms
        return max(1, int(sum(s.bytes for s in self._samples) * 1000 / self.bound) - elapsed)

    def _expire(self, now: int) -> None:
        horizon = now - self._windows * self._window_ms
        while self._samples and self._samples[0].start_ms <= horizon:
            self._samples.pop(0)


def parse_rate(configs: Mapping[str, str], key: str) -> int | None:
    """A throttled rate config, or None (unlimited) when unset."""
    value = configs.get(key)
    return None if value is None else int(value)

