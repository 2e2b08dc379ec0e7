"""A partition as this broker sees it: leadership, followers, ISR, and acting on the replication rules.

This is the sans-IO core of the leader side (Kafka's Partition.scala, facts §2-4): it owns no sockets and
no timers and reads time from an injected clock. The rules themselves (HW, ISR shrink and expand, epochs,
produce completion) are pure functions in `replication_rules`; this class gathers their inputs from its
state and log and applies their answers. ISR changes leave through the injected `alter_isr` callback (the
AlterPartition manager) and come back through `complete_isr_change`; the replica manager turns the booleans
returned here ("did the HW move?") into purgatory wake-ups.
"""

import dataclasses
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from replog.log.errors import OffsetOutOfRangeError
from replog.log.offset_metadata import LogOffsetMetadata
from replog.log.partition_log import AppendInfo, LogReadResult, PartitionLog, TopicPartition

from . import replication_rules as rules
from .follower_state import FollowerState

LEADER_NONE = -1
UNDEFINED_EPOCH = -1


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


@dataclass(frozen=True, slots=True)
class PendingIsrChange:
    """An ISR change sent to the controller and not yet answered; at most one per partition (KIP-497)."""

    kind: rules.IsrChangeKind
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
        # Called, without arguments, whenever what this partition reports besides its log's figures may have
        # changed: leadership, replicas, ISR, min.insync.replicas, a follower's fetch state. With its log's
        # listener, the broker's metrics dump re-encodes only the partitions it was told of.
        self.change_listener: Callable[[], None] | None = None

    def _changed(self) -> None:
        if self.change_listener is not None:
            self.change_listener()

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

    def update_min_insync_replicas(self, min_insync_replicas: int) -> None:
        """A dynamic min.insync.replicas (the topic's or the broker's default) took effect."""
        assert min_insync_replicas >= 1
        self.min_insync_replicas = min_insync_replicas
        self._changed()

    def effective_min_isr(self) -> int:
        return rules.effective_min_isr(self.min_insync_replicas, len(self.state.replicas))

    def is_under_min_isr(self) -> bool:
        return rules.is_under_min_isr(len(self.state.isr), min_insync_replicas=self.min_insync_replicas,
                                      replica_count=len(self.state.replicas))

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
                self.followers[broker_id] = FollowerState.initial(broker_id, now_ms=now, in_isr=broker_id in state.isr)
        for broker_id in [b for b in self.followers if b not in state.replicas]:
            del self.followers[broker_id]
        self._changed()
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
        self._changed()
        return changed

    def make_offline(self) -> None:
        """StopReplica without delete: neither lead nor follow until the controller says otherwise."""
        self.state = dataclasses.replace(self.state, leader=LEADER_NONE)
        self.pending_isr = None
        self.followers = {}
        self.leader_epoch_start_offset = -1
        self.leader_since_ms = 0
        self._changed()

    def mark_storage_failed(self) -> None:
        """Its log dir went offline: no longer lead or follow (Kafka's HostedPartition.Offline)."""
        self.make_offline()
        self.storage_failed = True

    def check_leader_epoch(self, requested_epoch: int) -> ErrorCode:
        return rules.leader_epoch_error(requested_epoch, self.state.leader_epoch)

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
        """For a parked acks=all produce: (done, error)."""
        return rules.produce_completion(
            required_offset, storage_failed=self.storage_failed, is_leader=self.is_leader,
            high_watermark=self.log.high_watermark, maximal_isr_size=len(self.maximal_isr),
            effective_min_isr=self.effective_min_isr())

    # ----------------------------------------------------------- high watermark

    def maybe_increment_high_watermark(self) -> bool:
        """Move the HW up to what the maximal ISR and the caught-up followers hold; returns whether it moved.
        Held still while the committed ISR is below min.insync.replicas."""
        if not self.is_leader or self.log.high_watermark == self.log.log_end_offset or self.is_under_min_isr():
            return False  # the HW never passes the LEO: at the LEO, no follower's fetch can move it
        new_hw = rules.leader_high_watermark(
            self.followers.values(), maximal_isr=self.maximal_isr, leader_log_end_offset=self.log.log_end_offset,
            now_ms=self._clock_ms(), replica_lag_time_max_ms=self.replica_lag_time_max_ms)
        return new_hw is not None and self.log.maybe_increment_high_watermark(
            new_hw, self._follower_fetch_position_at(new_hw))

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
        divergence = rules.fetch_divergence(
            fetch_offset=fetch_offset, last_fetched_epoch=last_fetched_epoch,
            epoch_end=self.log.epoch_cache.end_offset_for(last_fetched_epoch, self.log.log_end_offset),
            log_start_offset=self.log.log_start_offset)
        match divergence:
            case rules.FetchOffsetOutOfRange(reason):
                raise OffsetOutOfRangeError(f"{self.topic}-{self.index}: {reason}")
            case rules.DivergingEpoch(epoch, end_offset):
                return epoch, end_offset
            case None:
                return None

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int, log_start_offset: int,
                                    leader_log_end_offset: int, fetch_position: LogOffsetMetadata | None = None) -> bool:
        """A follower fetched at fetch_offset; returns whether the HW moved. May propose an ISR expansion.

        The HW is checked only when the follower's LEO moved (Kafka's Partition.updateFollowerFetchState):
        otherwise this fetch can only add the follower to the replicas counted (caught up now), which never
        raises the smallest LEO among them. Most follower fetches find nothing new (a fetch that brings data
        reports its new LEO only with the next one), and checked the HW all the same.
        """
        previous = self.followers.get(replica_id)
        if previous is None:
            raise PartitionError(ErrorCode.not_leader_or_follower,
                                 f"broker {replica_id} is not a replica of {self.topic}-{self.index}")
        follower = previous.after_fetch(fetch_offset, log_start_offset, self._clock_ms(), leader_log_end_offset,
                                        fetch_position)
        self.followers[replica_id] = follower
        self._changed()
        self._maybe_expand_isr(follower)
        return fetch_offset != previous.log_end_offset and self.maybe_increment_high_watermark()

    # --------------------------------------------------------------------- ISR

    def _maybe_expand_isr(self, follower: FollowerState) -> None:
        """Propose adding the follower that just fetched, if it may join; one change in flight at a time."""
        # Kafka's maybeExpandIsr asks canAddReplicaToIsr first (no change in flight, not in the ISR yet): for
        # an ISR member, nearly every follower fetch, there is nothing more to judge.
        if self.pending_isr is not None or follower.broker_id in self.state.isr:
            return
        change = rules.isr_expansion(follower, self.state.isr, high_watermark=self.log.high_watermark,
                                     leader_epoch_start_offset=self.leader_epoch_start_offset)
        if change is not None:
            self._propose(change)

    def maybe_shrink_isr(self) -> bool:
        """Drop ISR followers not caught up within replica.lag.time.max.ms; returns whether a change was sent."""
        if not self.is_leader or self.pending_isr is not None:
            return False
        change = rules.isr_shrink(self.state.isr, self.followers, leader_id=self.local_broker_id,
                                  leader_log_end_offset=self.log.log_end_offset, now_ms=self._clock_ms(),
                                  replica_lag_time_max_ms=self.replica_lag_time_max_ms)
        if change is None:
            return False
        self._propose(change)
        return True

    def _propose(self, change: rules.IsrChange) -> None:
        assert self.pending_isr is None
        assert self.local_broker_id in change.proposed_isr
        self.pending_isr = PendingIsrChange(change.kind, change.proposed_isr, change.maximal_isr,
                                            self.state.leader_epoch, self.state.partition_epoch)
        self._alter_isr(self, self.pending_isr)

    def complete_isr_change(self, change: PendingIsrChange, error: ErrorCode, *, leader_epoch: int = -1,
                            isr: tuple[int, ...] = (), partition_epoch: int = -1) -> bool:
        """The controller answered `change`; returns whether the HW moved.

        An answer for a change that is no longer pending (a LeaderAndIsr replaced it) is ignored, as is a
        success carrying a stale epoch. Other errors revert to the committed ISR.
        """
        if self.pending_isr is not change:
            return False
        outcome = rules.on_alter_partition_answer(
            error, current_leader_epoch=self.state.leader_epoch, current_partition_epoch=self.state.partition_epoch,
            leader_epoch=leader_epoch, isr=tuple(isr), partition_epoch=partition_epoch)
        match outcome:
            case rules.AwaitNewPartitionState() | rules.IgnoreAnswer():
                return False
            case rules.RevertIsrChange():
                self.pending_isr = None
            case rules.CommitIsr(committed_isr, committed_partition_epoch):
                assert self.local_broker_id in committed_isr
                self.state = dataclasses.replace(self.state, isr=committed_isr,
                                                 partition_epoch=committed_partition_epoch)
                self.pending_isr = None
                self._changed()
        return self.maybe_increment_high_watermark()

    # ------------------------------------------------------------------- read

    def read(self, fetch_offset: int, *, max_bytes: int, from_follower: bool, min_one_batch: bool) -> LogReadResult:
        upper_bound = self.log.log_end_offset if from_follower else self.log.high_watermark
        return self.log.read(fetch_offset, max_bytes=max_bytes, upper_bound=upper_bound, min_one_batch=min_one_batch)

    def end_offset_metadata_for_fetch(self, from_follower: bool) -> LogOffsetMetadata:
        """How far a fetch may read, with its position: the LEO for a follower, the HW for a consumer."""
        return self.log.log_end_offset_metadata if from_follower else self.log.high_watermark_metadata
