"""A partition as this broker sees it: leadership, ISR and the rules that move the high watermark.

This is the sans-IO core of the leader side; it owns no sockets and no timers. The replica manager calls
it and turns the booleans it returns (did the HW move?) into purgatory wake-ups.
"""

import uuid
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from replog.log.partition_log import AppendInfo, LogReadResult, PartitionLog

LEADER_NONE = -1


class PartitionError(Exception):
    def __init__(self, error_code: ErrorCode, message: str = "") -> None:
        super().__init__(message or error_code.name)
        self.error_code = error_code


@dataclass(frozen=True, slots=True)
class LeadershipState:
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


class Partition:
    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, log: PartitionLog, local_broker_id: int,
                 min_insync_replicas: int) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.local_broker_id = local_broker_id
        self.min_insync_replicas = min_insync_replicas
        self.state = LeadershipState(LEADER_NONE, -1, -1, (), ())

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.index)

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.local_broker_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def is_under_min_isr(self) -> bool:
        return len(self.state.isr) < min(self.min_insync_replicas, len(self.state.replicas))

    def make_leader(self, state: LeadershipState) -> bool:
        """Become leader for state.leader_epoch; False if the epoch is stale."""
        assert state.leader == self.local_broker_id
        assert self.local_broker_id in state.isr
        if state.leader_epoch < self.state.leader_epoch:
            return False
        self.state = state
        # The new epoch starts at our LEO (facts §2: makeLeader appends (epoch, LEO) to the cache).
        self.log.epoch_cache.assign(state.leader_epoch, self.log.log_end_offset)
        self.maybe_increment_high_watermark()
        return True

    def check_leader_epoch(self, requested_epoch: int) -> ErrorCode:
        """KIP-320: -1 skips the check; older is fenced, newer is unknown to us yet."""
        if requested_epoch == -1 or requested_epoch == self.state.leader_epoch:
            return ErrorCode.none
        if requested_epoch < self.state.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        return ErrorCode.unknown_leader_epoch

    def append_as_leader(self, records: memoryview, required_acks: int) -> AppendInfo:
        if not self.is_leader:
            raise PartitionError(ErrorCode.not_leader_or_follower)
        if required_acks == -1 and self.is_under_min_isr():
            raise PartitionError(ErrorCode.not_enough_replicas)
        info = self.log.append_as_leader(records, leader_epoch=self.state.leader_epoch)
        self.maybe_increment_high_watermark()
        return info

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the ISR, held still below min.insync.replicas (KAFKA-15583).

        Until followers fetch (the replication data plane), the only LEO the leader knows is its own.
        """
        if not self.is_leader or self.is_under_min_isr():
            return False
        return self.log.maybe_increment_high_watermark(self.log.log_end_offset)

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """For a parked acks=all produce: (done, error)."""
        if not self.is_leader:
            return True, ErrorCode.not_leader_or_follower
        if self.log.high_watermark < required_offset:
            return False, ErrorCode.none
        if len(self.state.isr) < self.min_insync_replicas:
            return True, ErrorCode.not_enough_replicas_after_append
        return True, ErrorCode.none

    def read(self, fetch_offset: int, *, max_bytes: int, from_follower: bool, min_one_batch: bool) -> LogReadResult:
        upper_bound = self.log.log_end_offset if from_follower else self.log.high_watermark
        return self.log.read(fetch_offset, max_bytes=max_bytes, upper_bound=upper_bound, min_one_batch=min_one_batch)

    def end_offset_for_fetch(self, from_follower: bool) -> int:
        return self.log.log_end_offset if from_follower else self.log.high_watermark
