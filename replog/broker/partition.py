"""A partition as this broker sees it: leadership, followers, ISR, and the rules that move the high watermark.

This is the sans-IO core of the leader side (Kafka's Partition.scala, facts §2-4): it owns no sockets and
no timers and reads time from an injected clock. ISR changes leave through the injected `alter_isr`
callback (the AlterPartition manager) and come back through `complete_isr_change`; the replica manager
turns the booleans returned here ("did the HW move?") into purgatory wake-ups.
"""

import dataclasses
import enum
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from replog.log.errors import OffsetOutOfRangeError
from replog.log.offset_metadata import LogOffsetMetadata
from replog.log.partition_log import AppendInfo, LogReadResult, PartitionLog, TopicPartition

from .follower_state import FollowerState

LEADER_NONE = -1
UNDEFINED_EPOCH = -1

# Controller answers after which the pending change stays put until the controller's next LeaderAndIsr
# brings a newer partition state (Kafka's handleAlterPartitionError); retrying would only repeat them.
_AWAIT_NEW_STATE_ERRORS = frozenset({
    ErrorCode.fenced_leader_epoch, ErrorCode.invalid_update_version, ErrorCode.unknown_topic_or_partition,
    ErrorCode.unknown_topic_id,
})


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
    isr: tuple[int, ...]  # the committed ISR: what the controller last confirmed


class IsrChangeKind(enum.Enum):
    EXPAND = "expand"
    SHRINK = "shrink"


@dataclass(frozen=True, slots=True)
class PendingIsrChange:
    """An ISR change sent to the controller and not yet answered; at most one per partition (KIP-497)."""

    kind: IsrChangeKind
    proposed_isr: tuple[int, ...]
    # What HW and acks=all count while the change is in flight: an expansion counts the new member at once
    # (it is caught up), a shrink keeps counting the leaving ones until the controller commits it.
    maximal_isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int


AlterIsr = Callable[["Partition", PendingIsrChange], None]


class Partition:
    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, log: PartitionLog, local_broker_id: int,
                 min_insync_replicas: int, *, clock_ms: Callable[[], int], replica_lag_time_max_ms: int,
                 alter_isr: AlterIsr) -> None:
        assert min_insync_replicas >= 1
        assert replica_lag_time_max_ms > 0
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.local_broker_id = local_broker_id
        self.min_insync_replicas = min_insync_replicas
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._clock_ms = clock_ms
        self._alter_isr = alter_isr
        self.state = LeadershipState(LEADER_NONE, UNDEFINED_EPOCH, UNDEFINED_EPOCH, (), ())
        self.pending_isr: PendingIsrChange | None = None
        self.followers: dict[int, FollowerState] = {}
        self.leader_epoch_start_offset = -1
        self.leader_since_ms = 0  # when this broker took the current leader epoch; 0 while not leading
        # Its log dir failed (KIP-112): every request answers KAFKA_STORAGE_ERROR until the broker restarts.
        self.storage_failed = False

    def __repr__(self) -> str:
        return f"<Partition {self.topic}-{self.index} {self.state}>"

    @property
    def key(self) -> TopicPartition:
        return TopicPartition(self.topic, self.index)

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.local_broker_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        return self.pending_isr.maximal_isr if self.pending_isr is not None else self.state.isr

    def effective_min_isr(self) -> int:
        return min(self.min_insync_replicas, max(len(self.state.replicas), 1))

    def is_under_min_isr(self) -> bool:
        """Judged on the committed ISR: an expansion in flight does not count yet (KAFKA-15583)."""
        return len(self.state.isr) < self.effective_min_isr()

    # ----------------------------------------------------------- leadership

    def make_leader(self, state: LeadershipState) -> bool:
        """Lead with `state`; returns whether this is a new leader epoch for us.

        A new epoch starts at our LEO in the epoch cache (facts §2), and every follower's fetch state is
        reset: ISR members count as caught up now, the others as never. The same epoch with a newer
        partition epoch is the controller changing ISR or replicas under us: follower states are kept.
        """
        assert state.leader == self.local_broker_id
        assert self.local_broker_id in state.isr, state
        assert state.leader_epoch >= self.state.leader_epoch
        new_epoch = not self.is_leader or state.leader_epoch > self.state.leader_epoch
        if new_epoch:
            # First, so that a failed checkpoint write (OSError) leaves the partition as it was.
            self.log.epoch_cache.assign(state.leader_epoch, self.log.log_end_offset)
        self.state = state
        self.pending_isr = None
        now = self._clock_ms()
        if new_epoch:
            self.leader_epoch_start_offset = self.log.log_end_offset
            self.leader_since_ms = now
            self.followers = {}
        for broker_id in state.replicas:
            if broker_id != self.local_broker_id and broker_id not in self.followers:
                self.followers[broker_id] = FollowerState(broker_id)
                self.followers[broker_id].reset(now, in_isr=broker_id in state.isr)
        for broker_id in [b for b in self.followers if b not in state.replicas]:
            del self.followers[broker_id]
        self.maybe_increment_high_watermark()
        return new_epoch

    def make_follower(self, state: LeadershipState) -> bool:
        """Follow state.leader; returns whether the leader or its epoch changed (the fetcher must restart)."""
        assert state.leader != self.local_broker_id
        assert state.leader_epoch >= self.state.leader_epoch
        changed = state.leader != self.state.leader or state.leader_epoch != self.state.leader_epoch
        self.state = state
        self.pending_isr = None
        self.followers = {}
        self.leader_epoch_start_offset = -1
        self.leader_since_ms = 0
        return changed

    def make_offline(self) -> None:
        """StopReplica without delete: neither lead nor follow until the controller says otherwise."""
        self.state = dataclasses.replace(self.state, leader=LEADER_NONE)
        self.pending_isr = None
        self.followers = {}
        self.leader_epoch_start_offset = -1
        self.leader_since_ms = 0

    def mark_storage_failed(self) -> None:
        """Its log dir went offline: no longer lead or follow (Kafka's HostedPartition.Offline)."""
        self.make_offline()
        self.storage_failed = True

    def check_leader_epoch(self, requested_epoch: int) -> ErrorCode:
        """KIP-320: -1 skips the check; older is fenced, newer is unknown to us yet."""
        if requested_epoch == UNDEFINED_EPOCH or requested_epoch == self.state.leader_epoch:
            return ErrorCode.none
        if requested_epoch < self.state.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        return ErrorCode.unknown_leader_epoch

    # ---------------------------------------------------------------- produce

    def append_as_leader(self, records: memoryview, required_acks: int) -> AppendInfo:
        if self.storage_failed:
            raise PartitionError(ErrorCode.kafka_storage_error, f"the log dir of {self.topic}-{self.index} is offline")
        if not self.is_leader:
            raise PartitionError(ErrorCode.not_leader_or_follower)
        if required_acks == -1 and self.is_under_min_isr():
            raise PartitionError(
                ErrorCode.not_enough_replicas,
                f"ISR {list(self.state.isr)} is smaller than min.insync.replicas={self.effective_min_isr()}")
        info = self.log.append_as_leader(records, leader_epoch=self.state.leader_epoch)
        self.maybe_increment_high_watermark()
        return info

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """For a parked acks=all produce: (done, error). acks=all waits for the whole ISR (facts §3)."""
        if self.storage_failed:
            return True, ErrorCode.kafka_storage_error
        if not self.is_leader:
            return True, ErrorCode.not_leader_or_follower
        if self.log.high_watermark < required_offset:
            return False, ErrorCode.none
        if len(self.maximal_isr) < self.effective_min_isr():
            return True, ErrorCode.not_enough_replicas_after_append
        return True, ErrorCode.none

    # ----------------------------------------------------------- high watermark

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the maximal ISR and over caught-up followers outside it (Partition.scala
        maybeIncrementLeaderHW); held still while the committed ISR is below min.insync.replicas."""
        if not self.is_leader or self.is_under_min_isr():
            return False
        leader_end = self.log.log_end_offset
        now = self._clock_ms()
        isr = self.maximal_isr
        new_hw = leader_end
        for follower in self.followers.values():
            if follower.log_end_offset < new_hw and (
                    follower.broker_id in isr
                    or follower.is_caught_up(leader_end, now, self.replica_lag_time_max_ms)):
                new_hw = follower.log_end_offset
        if new_hw < 0:
            return False  # an ISR member has not fetched since we became leader
        return self.log.maybe_increment_high_watermark(new_hw, self._follower_fetch_position_at(new_hw))

    def _follower_fetch_position_at(self, offset: int) -> LogOffsetMetadata | None:
        """Where `offset` sits in our log, known without a lookup because a follower's last fetch started
        there (Kafka takes the HW's position from the replica that bounds it). None at our LEO: the log
        knows its own end, and a follower that fetched there before a roll holds an older position."""
        if offset == self.log.log_end_offset:
            return None
        for follower in self.followers.values():
            if follower.fetch_position is not None and follower.fetch_position.message_offset == offset:
                return follower.fetch_position
        return None

    # ---------------------------------------------------------- follower fetch

    def diverging_epoch(self, fetch_offset: int, last_fetched_epoch: int) -> tuple[int, int] | None:
        """The (epoch, end offset) a fetcher must truncate to, or None when its log agrees with ours.

        Partition.scala readRecords with LastFetchedEpoch (Fetch v12, KIP-595's truncation on fetch).
        """
        if last_fetched_epoch == UNDEFINED_EPOCH:
            return None
        epoch, end_offset = self.log.epoch_cache.end_offset_for(last_fetched_epoch, self.log.log_end_offset)
        if epoch == UNDEFINED_EPOCH:
            raise OffsetOutOfRangeError(
                f"{self.topic}-{self.index}: last fetched epoch {last_fetched_epoch} is unknown to the leader")
        if fetch_offset < self.log.log_start_offset:
            raise OffsetOutOfRangeError(
                f"{self.topic}-{self.index}: fetch offset {fetch_offset} < log start {self.log.log_start_offset}")
        if epoch < last_fetched_epoch or end_offset < fetch_offset:
            return epoch, end_offset
        return None

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int, log_start_offset: int,
                                    leader_log_end_offset: int, fetch_position: LogOffsetMetadata | None = None) -> bool:
        """A follower fetched at fetch_offset; returns whether the HW moved. May propose an ISR expansion."""
        follower = self.followers.get(replica_id)
        if follower is None:
            raise PartitionError(ErrorCode.not_leader_or_follower,
                                 f"broker {replica_id} is not a replica of {self.topic}-{self.index}")
        follower.update_fetch_state(fetch_offset, log_start_offset, self._clock_ms(), leader_log_end_offset)
        follower.fetch_position = fetch_position
        self._maybe_expand_isr(follower)
        return self.maybe_increment_high_watermark()

    # --------------------------------------------------------------------- ISR

    def _maybe_expand_isr(self, follower: FollowerState) -> None:
        """A follower rejoins once it has everything committed and everything of our epoch's start
        (Partition.isFollowerInSync), so it never joins while missing records the ISR acknowledged."""
        if self.pending_isr is not None or follower.broker_id in self.state.isr:
            return
        if (follower.log_end_offset >= self.log.high_watermark
                and follower.log_end_offset >= self.leader_epoch_start_offset):
            proposed = self.state.isr + (follower.broker_id,)
            self._propose(IsrChangeKind.EXPAND, proposed, maximal=proposed)

    def maybe_shrink_isr(self) -> bool:
        """Drop ISR followers not caught up within replica.lag.time.max.ms; returns whether a change was sent."""
        if not self.is_leader or self.pending_isr is not None:
            return False
        leader_end = self.log.log_end_offset
        now = self._clock_ms()
        out_of_sync = {
            broker_id for broker_id in self.state.isr
            if broker_id != self.local_broker_id and (
                broker_id not in self.followers
                or not self.followers[broker_id].is_caught_up(leader_end, now, self.replica_lag_time_max_ms))
        }
        if not out_of_sync:
            return False
        proposed = tuple(b for b in self.state.isr if b not in out_of_sync)
        self._propose(IsrChangeKind.SHRINK, proposed, maximal=self.state.isr)
        return True

    def _propose(self, kind: IsrChangeKind, proposed: tuple[int, ...], *, maximal: tuple[int, ...]) -> None:
        assert self.pending_isr is None
        assert self.local_broker_id in proposed
        self.pending_isr = PendingIsrChange(kind, proposed, maximal, self.state.leader_epoch,
                                            self.state.partition_epoch)
        self._alter_isr(self, self.pending_isr)

    def complete_isr_change(self, change: PendingIsrChange, error: ErrorCode, *, leader_epoch: int = -1,
                            isr: tuple[int, ...] = (), partition_epoch: int = -1) -> bool:
        """The controller answered `change`; returns whether the HW moved.

        An answer for a change that is no longer pending (a LeaderAndIsr replaced it) is ignored, as is a
        success carrying a stale epoch. Other errors revert to the committed ISR.
        """
        if self.pending_isr is not change:
            return False
        if error != ErrorCode.none:
            if error not in _AWAIT_NEW_STATE_ERRORS:
                self.pending_isr = None
                return self.maybe_increment_high_watermark()
            return False
        if leader_epoch != self.state.leader_epoch or partition_epoch < self.state.partition_epoch:
            return False
        assert self.local_broker_id in isr
        self.state = dataclasses.replace(self.state, isr=tuple(isr), partition_epoch=partition_epoch)
        self.pending_isr = None
        return self.maybe_increment_high_watermark()

    # ------------------------------------------------------------------- read

    def read(self, fetch_offset: int, *, max_bytes: int, from_follower: bool, min_one_batch: bool) -> LogReadResult:
        upper_bound = self.log.log_end_offset if from_follower else self.log.high_watermark
        return self.log.read(fetch_offset, max_bytes=max_bytes, upper_bound=upper_bound, min_one_batch=min_one_batch)

    def end_offset_metadata_for_fetch(self, from_follower: bool) -> LogOffsetMetadata:
        """How far a fetch may read, with its position: the LEO for a follower, the HW for a consumer."""
        return self.log.log_end_offset_metadata if from_follower else self.log.high_watermark_metadata
