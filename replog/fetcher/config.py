"""Follower-side settings and the description of a partition to follow.

`manager` re-exports these; they live apart so the endpoint, the fetcher and the manager can all import them
without a cycle.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from replog.log.partition_log import PartitionLog, TopicPartition

# Told of each fetched partition answer that was appended: (partition, bytes appended, the leader's HW).
FetchObserver = Callable[[TopicPartition, int, int], None]


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    """Kafka's replica.fetch.* settings with Kafka's defaults (facts section 7)."""

    replica_id: int  # our broker id: followers fetch with it, which makes the leader read up to its LEO
    max_wait_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    max_bytes: int = 10_485_760  # replica.fetch.response.max.bytes
    partition_max_bytes: int = 1_048_576  # replica.fetch.max.bytes
    backoff_ms: int = 1_000  # replica.fetch.backoff.ms
    num_fetchers: int = 1  # num.replica.fetchers (per source broker)
    request_timeout_ms: int = 30_000  # replica.socket.timeout.ms

    def __post_init__(self) -> None:
        assert self.replica_id >= 0, "only a broker follows a leader"
        assert self.max_wait_ms >= 0
        assert self.min_bytes >= 0
        assert self.partition_max_bytes > 0
        assert self.max_bytes > 0
        assert self.backoff_ms >= 0
        assert self.num_fetchers > 0
        # Kafka refuses replica.socket.timeout.ms < replica.fetch.wait.max.ms (KafkaConfig validation): a fetch
        # parked for max_wait on the leader would otherwise always time out.
        assert self.request_timeout_ms > self.max_wait_ms, (self.request_timeout_ms, self.max_wait_ms)


@dataclass(frozen=True, slots=True)
class LeaderInfo:
    broker_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class InitialFetchState:
    """What the replica manager knows when it makes this broker a follower (Kafka's InitialFetchState)."""

    topic_id: uuid.UUID | None
    leader: LeaderInfo
    current_leader_epoch: int
    log: PartitionLog

    def __post_init__(self) -> None:
        assert self.current_leader_epoch >= 0
