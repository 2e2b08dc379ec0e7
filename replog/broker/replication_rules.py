"""The partition leader's replication rules as pure functions: no I/O, no log, no asyncio, no clock.

Each function takes the facts it needs (follower states, offsets and epochs the partition read from its log
and its state, the time as `now_ms`) and returns a small value saying what holds or what to do;
`partition.Partition` acts on it. The rules are Kafka's Partition.scala ones (facts §2-5), cited where they
are applied. The follower's side of the same protocol is `replog.fetcher.decisions`.

DelayedFetch's completion cases are not here: they are arithmetic on cached log positions, which live with
the log (Kafka's LogOffsetMetadata).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from replog.log.epoch_cache import UNDEFINED_EPOCH

from .follower_state import FollowerState

# Controller answers after which a pending ISR change stays put until the controller's next LeaderAndIsr
# brings a newer partition state (Kafka's handleAlterPartitionError); retrying would only repeat them.
_AWAIT_NEW_STATE_ERRORS = frozenset({
    ErrorCode.fenced_leader_epoch, ErrorCode.invalid_update_version, ErrorCode.unknown_topic_or_partition,
    ErrorCode.unknown_topic_id,
})

# ------------------------------------------------------------------ values


class IsrChangeKind(enum.Enum):
    EXPAND = "expand"
    SHRINK = "shrink"


@dataclass(frozen=True, slots=True)
class IsrChange:
    """An ISR change for the leader to send to the controller (Kafka's PendingExpandIsr / PendingShrinkIsr)."""

    kind: IsrChangeKind
    proposed_isr: tuple[int, ...]
    maximal_isr: tuple[int, ...]  # what HW and acks=all count while the change is in flight


@dataclass(frozen=True, slots=True)
class DivergingEpoch:
    """The (epoch, end offset) a follower must truncate to before it may fetch on (Fetch v12)."""

    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class FetchOffsetOutOfRange:
    reason: str


@dataclass(frozen=True, slots=True)
class CommitIsr:
    """The controller committed the change: this is the partition's ISR from now on."""

    isr: tuple[int, ...]
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class RevertIsrChange:
    """Drop the pending change and count the committed ISR again; a later check may propose it anew."""


@dataclass(frozen=True, slots=True)
class AwaitNewPartitionState:
    """Keep the change pending: only the controller's next LeaderAndIsr can say where the partition stands."""


@dataclass(frozen=True, slots=True)
class IgnoreAnswer:
    """A success for another leader epoch or an older partition epoch: it says nothing about this state."""


AlterPartitionOutcome = CommitIsr | RevertIsrChange | AwaitNewPartitionState | IgnoreAnswer

# ----------------------------------------------------------- epochs and state


def leader_epoch_error(requested_epoch: int, leader_epoch: int) -> ErrorCode:
    """KIP-320 (Partition.checkCurrentLeaderEpoch): -1 skips the check; older is fenced, newer is unknown to
    us yet."""
    if requested_epoch == UNDEFINED_EPOCH or requested_epoch == leader_epoch:
        return ErrorCode.none
    if requested_epoch < leader_epoch:
        return ErrorCode.fenced_leader_epoch
    return ErrorCode.unknown_leader_epoch


def is_stale_partition_state(*, current_leader_epoch: int, current_partition_epoch: int, leader_epoch: int,
                             partition_epoch: int) -> bool:
    """Whether a LeaderAndIsr partition state is one this replica has seen or passed already
    (ReplicaManager.becomeLeaderOrFollower): an older leader epoch, or the same one without a newer
    partition epoch."""
    if leader_epoch != current_leader_epoch:
        return leader_epoch < current_leader_epoch
    return partition_epoch <= current_partition_epoch


def effective_min_isr(min_insync_replicas: int, replica_count: int) -> int:
    """min.insync.replicas, but never more than there are replicas."""
    assert min_insync_replicas >= 1
    return min(min_insync_replicas, max(replica_count, 1))


def is_under_min_isr(committed_isr_size: int, *, min_insync_replicas: int, replica_count: int) -> bool:
    """Judged on the committed ISR: an expansion in flight does not count yet (KAFKA-15583)."""
    return committed_isr_size < effective_min_isr(min_insync_replicas, replica_count)


# ------------------------------------------------------------ high watermark


def leader_high_watermark(followers: Iterable[FollowerState], *, maximal_isr: tuple[int, ...],
                          leader_log_end_offset: int, now_ms: int, replica_lag_time_max_ms: int) -> int | None:
    """Partition.maybeIncrementLeaderHW: the smallest LEO among the leader's and those of the followers in
    the maximal ISR or caught up within the lag (a follower about to join must not miss what it counts for).

    None while a follower that counts has not fetched since this leader epoch began: its LEO is unknown.
    The caller holds the HW still under min.insync.replicas, and the log never moves it back.
    """
    assert leader_log_end_offset >= 0
    counted = [follower.log_end_offset for follower in followers
               if follower.broker_id in maximal_isr
               or follower.is_caught_up(leader_log_end_offset, now_ms, replica_lag_time_max_ms)]
    new_hw = min([leader_log_end_offset, *counted])
    return None if new_hw < 0 else new_hw


# ----------------------------------------------------------------------- ISR


def may_join_isr(follower: FollowerState, *, high_watermark: int, leader_epoch_start_offset: int) -> bool:
    """Partition.isFollowerInSync: the follower has everything committed and everything up to this leader
    epoch's start, so it never joins while missing records the ISR acknowledged.

    Kafka also asks whether the replica is ISR-eligible (KIP-841: registered, not fenced, not shutting
    down). A broker here does not track other brokers' sessions: the controller judges that and answers
    INELIGIBLE_REPLICA, which reverts the expansion.
    """
    return (follower.log_end_offset >= high_watermark
            and follower.log_end_offset >= leader_epoch_start_offset)


def isr_expansion(follower: FollowerState, committed_isr: tuple[int, ...], *, high_watermark: int,
                  leader_epoch_start_offset: int) -> IsrChange | None:
    """Partition.maybeExpandIsr for the follower that just fetched. An expansion counts the new member at
    once (it is caught up), so it is part of the maximal ISR."""
    if follower.broker_id in committed_isr:
        return None
    if not may_join_isr(follower, high_watermark=high_watermark,
                        leader_epoch_start_offset=leader_epoch_start_offset):
        return None
    expanded = committed_isr + (follower.broker_id,)
    return IsrChange(IsrChangeKind.EXPAND, expanded, maximal_isr=expanded)


def out_of_sync_replicas(committed_isr: tuple[int, ...], followers: Mapping[int, FollowerState], *,
                         leader_id: int, leader_log_end_offset: int, now_ms: int,
                         replica_lag_time_max_ms: int) -> frozenset[int]:
    """Partition.getOutOfSyncReplicas (isFollowerOutOfSync): the ISR members other than the leader that are
    unknown here or not caught up within replica.lag.time.max.ms."""
    return frozenset(
        broker_id for broker_id in committed_isr
        if broker_id != leader_id and (
            broker_id not in followers
            or not followers[broker_id].is_caught_up(leader_log_end_offset, now_ms, replica_lag_time_max_ms)))


def isr_shrink(committed_isr: tuple[int, ...], followers: Mapping[int, FollowerState], *, leader_id: int,
               leader_log_end_offset: int, now_ms: int, replica_lag_time_max_ms: int) -> IsrChange | None:
    """Partition.maybeShrinkIsr. A shrink is not optimistic: the leaving members keep counting for the HW
    and acks=all until the controller commits it."""
    out_of_sync = out_of_sync_replicas(committed_isr, followers, leader_id=leader_id,
                                       leader_log_end_offset=leader_log_end_offset, now_ms=now_ms,
                                       replica_lag_time_max_ms=replica_lag_time_max_ms)
    if not out_of_sync:
        return None
    shrunk = tuple(broker_id for broker_id in committed_isr if broker_id not in out_of_sync)
    return IsrChange(IsrChangeKind.SHRINK, shrunk, maximal_isr=committed_isr)


def on_alter_partition_answer(error: ErrorCode, *, current_leader_epoch: int, current_partition_epoch: int,
                              leader_epoch: int, isr: tuple[int, ...],
                              partition_epoch: int) -> AlterPartitionOutcome:
    """What the leader does with the controller's answer to its pending change (Partition.scala
    handleAlterPartitionError / handleAlterPartitionUpdate). The epochs and ISR are the answer's."""
    if error != ErrorCode.none:
        if error in _AWAIT_NEW_STATE_ERRORS:
            return AwaitNewPartitionState()
        return RevertIsrChange()
    if leader_epoch != current_leader_epoch or partition_epoch < current_partition_epoch:
        return IgnoreAnswer()
    return CommitIsr(isr, partition_epoch)


# ------------------------------------------------------------------- produce


def produce_completion(required_offset: int, *, storage_failed: bool, is_leader: bool, high_watermark: int,
                       maximal_isr_size: int, effective_min_isr: int) -> tuple[bool, ErrorCode]:
    """Partition.checkEnoughReplicasReachOffset for a parked acks=all produce: (done, error).

    acks=all waits for the whole ISR, which the HW stands for (facts §3); min.insync.replicas is judged
    once it got there, on the maximal ISR.
    """
    if storage_failed:
        return True, ErrorCode.kafka_storage_error
    if not is_leader:
        return True, ErrorCode.not_leader_or_follower
    if high_watermark < required_offset:
        return False, ErrorCode.none
    if maximal_isr_size < effective_min_isr:
        return True, ErrorCode.not_enough_replicas_after_append
    return True, ErrorCode.none


# ------------------------------------------------------------- follower fetch


def fetch_divergence(*, fetch_offset: int, last_fetched_epoch: int, epoch_end: tuple[int, int],
                     log_start_offset: int) -> DivergingEpoch | FetchOffsetOutOfRange | None:
    """Partition.readRecords with LastFetchedEpoch (Fetch v12, KIP-595's truncation on fetch): whether the
    follower's log diverges from ours. `epoch_end` is our epoch cache's end_offset_for(last_fetched_epoch,
    LEO): the largest epoch we have that is <= the follower's, and where it ends."""
    assert last_fetched_epoch != UNDEFINED_EPOCH
    epoch, end_offset = epoch_end
    if epoch == UNDEFINED_EPOCH:
        return FetchOffsetOutOfRange(f"last fetched epoch {last_fetched_epoch} is unknown to the leader")
    if fetch_offset < log_start_offset:
        return FetchOffsetOutOfRange(f"fetch offset {fetch_offset} < log start {log_start_offset}")
    if epoch < last_fetched_epoch or end_offset < fetch_offset:
        return DivergingEpoch(epoch, end_offset)
    return None
