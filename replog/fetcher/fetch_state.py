"""Where one followed partition stands (Kafka's PartitionFetchState): immutable, replaced on every change."""

from __future__ import annotations

import dataclasses
import enum
import uuid
from dataclasses import dataclass


class FetchPhase(enum.Enum):
    # Kafka's ReplicaState: Truncating asks the leader where the logs diverge before any fetch.
    TRUNCATING = "truncating"
    FETCHING = "fetching"


@dataclass(frozen=True, slots=True)
class PartitionFetchState:
    topic_id: uuid.UUID | None
    fetch_offset: int
    current_leader_epoch: int
    # Epoch of the last batch fetched (or the log's latest epoch): sent as LastFetchedEpoch so the leader can
    # answer DivergingEpoch (Fetch v12, KIP-595 / KAFKA-10554). None: the log has no epochs.
    last_fetched_epoch: int | None
    phase: FetchPhase
    # Identity of this partition's stay in its fetcher: a new value whenever the partition is (re)added with a
    # fresh state, so an answer to a request built from an older stay is recognisable even at the same offset.
    generation: int
    delayed_until_ms: int = 0  # back-off: not fetched or truncated before this time

    def __post_init__(self) -> None:
        assert self.fetch_offset >= 0
        assert self.current_leader_epoch >= 0
        assert self.last_fetched_epoch is None or self.last_fetched_epoch >= 0
        assert self.generation >= 0

    def is_delayed(self, now_ms: int) -> bool:
        return now_ms < self.delayed_until_ms

    def is_ready_to_fetch(self, now_ms: int) -> bool:
        return self.phase is FetchPhase.FETCHING and not self.is_delayed(now_ms)

    def is_ready_to_truncate(self, now_ms: int) -> bool:
        return self.phase is FetchPhase.TRUNCATING and not self.is_delayed(now_ms)

    def delayed(self, now_ms: int, backoff_ms: int) -> PartitionFetchState:
        # Kafka's delayPartitions leaves an already delayed partition alone: errors do not stack back-offs.
        if self.is_delayed(now_ms):
            return self
        return dataclasses.replace(self, delayed_until_ms=now_ms + backoff_ms)

    def fetching_from(self, offset: int, last_fetched_epoch: int | None) -> PartitionFetchState:
        # After every append: the constructor, not dataclasses.replace, which reads every field by name.
        return PartitionFetchState(
            self.topic_id, offset, self.current_leader_epoch, last_fetched_epoch, FetchPhase.FETCHING,
            self.generation, self.delayed_until_ms,
        )  # fmt: skip

    def truncating_from(self, offset: int, last_fetched_epoch: int | None) -> PartitionFetchState:
        return dataclasses.replace(
            self, fetch_offset=offset, last_fetched_epoch=last_fetched_epoch, phase=FetchPhase.TRUNCATING
        )
