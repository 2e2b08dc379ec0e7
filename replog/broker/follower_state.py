"""What a partition leader knows about one follower: its LEO, when it last fetched, when it was last caught up.

Kafka's Replica.scala rules (facts §4), on an immutable value as Kafka's ReplicaState is: each fetch makes a
new one, so the replication rules read a snapshot that nothing changes under them. "Caught up" is judged by
time, not by offsets alone, so a follower that fetches constantly under heavy produce load stays in the ISR
even though it never reaches the moving LEO exactly (KAFKA-4485).
"""

import dataclasses
from dataclasses import dataclass
from typing import Self

from replog.log.offset_metadata import LogOffsetMetadata

UNKNOWN_OFFSET = -1


@dataclass(frozen=True, slots=True)
class FollowerState:
    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_time_ms: int = 0
    # Where its last fetch started reading in our log (Kafka keeps this LogOffsetMetadata too): its lag in
    # bytes without an index lookup.
    fetch_position: LogOffsetMetadata | None = None

    @classmethod
    def initial(cls, broker_id: int, *, now_ms: int, in_isr: bool) -> Self:
        """A follower of a new leader epoch, or a replica just added: nothing known of its log yet. ISR
        members count as caught up now, the others as never (Kafka's resetReplicaState)."""
        return cls(broker_id, last_caught_up_time_ms=now_ms if in_isr else 0)

    def after_fetch(self, fetch_offset: int, log_start_offset: int, fetch_time_ms: int,
                    leader_log_end_offset: int, fetch_position: LogOffsetMetadata | None) -> Self:
        """The state after a fetch at fetch_offset (the follower's LEO) made when the leader's LEO was
        leader_log_end_offset.

        lastCaughtUpTime moves to this fetch's time when the follower asked for everything the leader had;
        to the previous fetch's time when it asked for everything the leader had back then (Replica.scala).
        """
        last_caught_up_time_ms = self.last_caught_up_time_ms
        if fetch_offset >= leader_log_end_offset:
            last_caught_up_time_ms = max(last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            last_caught_up_time_ms = max(last_caught_up_time_ms, self.last_fetch_time_ms)
        return dataclasses.replace(
            self, log_end_offset=fetch_offset, log_start_offset=log_start_offset, last_fetch_time_ms=fetch_time_ms,
            last_fetch_leader_log_end_offset=leader_log_end_offset, last_caught_up_time_ms=last_caught_up_time_ms,
            fetch_position=fetch_position)

    def is_caught_up(self, leader_log_end_offset: int, now_ms: int, replica_lag_time_max_ms: int) -> bool:
        return (self.log_end_offset == leader_log_end_offset
                or now_ms - self.last_caught_up_time_ms <= replica_lag_time_max_ms)
