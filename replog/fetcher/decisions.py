"""The follower's fetch decisions as pure functions: no I/O, no asyncio, no clock.

Each function takes the facts it needs (a fetch state, numbers read from the local log, the leader's answer)
and returns a small value saying what to do; `replica_fetcher` executes it. The rules are Kafka's
AbstractFetcherThread ones (facts section 2), cited where they are applied.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from replog.fetcher.fetch_state import FetchPhase, PartitionFetchState
from replog.log.epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from replog.protocol.fetch import FetchPartitionResult
from replog.protocol.records import iter_batches

# ------------------------------------------------------------------ actions


@dataclass(frozen=True, slots=True)
class OffsetTruncation:
    """Kafka's OffsetTruncationState: truncate to `offset`; not `completed` means ask the leader again."""

    offset: int
    completed: bool


@dataclass(frozen=True, slots=True)
class AskLeaderEpochEnd:
    """Send OffsetForLeaderEpoch for `epoch` (the local latest epoch)."""

    epoch: int


@dataclass(frozen=True, slots=True)
class Diverged:
    """The leader's (epoch, end offset) for an epoch we asked about: the logs may differ after end_offset."""

    leader_epoch: int
    leader_end_offset: int


@dataclass(frozen=True, slots=True)
class Append:
    """Whole batches to append at the fetch offset, then take the leader's HW and log start offset."""

    records: memoryview  # a slice of the response frame, never a copy
    last_batch_epoch: int | None
    leader_high_watermark: int
    leader_log_start_offset: int


@dataclass(frozen=True, slots=True)
class ResolveOutOfRange:
    """Ask the leader for its log end and log start offsets, then `resolve_out_of_range`."""


@dataclass(frozen=True, slots=True)
class BackOff:
    error_code: int


@dataclass(frozen=True, slots=True)
class Fail:
    """Stop fetching the partition until the replica manager adds it again (Kafka's markPartitionFailed)."""

    error_code: int


@dataclass(frozen=True, slots=True)
class Drop:
    """The answer is for a state that no longer exists (removed, re-added, truncated or moved meanwhile)."""


@dataclass(frozen=True, slots=True)
class TruncateTo:
    offset: int


@dataclass(frozen=True, slots=True)
class TruncateFullyAndStartAt:
    offset: int


@dataclass(frozen=True, slots=True)
class FetchFrom:
    offset: int


PartitionAction = Append | Diverged | ResolveOutOfRange | BackOff | Fail | Drop
EpochAnswerAction = Diverged | BackOff | Fail | Drop
OutOfRangeResolution = TruncateTo | TruncateFullyAndStartAt | FetchFrom

# ------------------------------------------------------------ initial state


def initial_fetch_state(
    topic_id: uuid.UUID | None,
    current_leader_epoch: int,
    *,
    log_end_offset: int,
    high_watermark: int,
    latest_epoch: int,
    generation: int,
) -> PartitionFetchState:
    """Kafka's ReplicaManager.initialFetchOffset and AbstractFetcherThread.partitionFetchState (IBP >= 2.7).

    With an epoch cache the follower fetches from its LEO with LastFetchedEpoch, and the leader's
    DivergingEpoch tells it where to truncate. Without one it cannot prove anything past its HW, so it
    starts Truncating, which truncates to the HW.
    """
    assert 0 <= high_watermark <= log_end_offset
    if latest_epoch != UNDEFINED_EPOCH:
        return PartitionFetchState(
            topic_id, log_end_offset, current_leader_epoch, latest_epoch, FetchPhase.FETCHING, generation
        )
    return PartitionFetchState(
        topic_id, high_watermark, current_leader_epoch, None, FetchPhase.TRUNCATING, generation
    )


# --------------------------------------------------------------- truncation


def truncating_step(state: PartitionFetchState, latest_epoch: int) -> AskLeaderEpochEnd | OffsetTruncation:
    """AbstractFetcherThread.maybeTruncate: ask about the latest local epoch, or without one truncate to the
    fetch offset, which for a partition without epochs is its HW (truncateToHighWatermark)."""
    assert state.phase is FetchPhase.TRUNCATING
    if latest_epoch == UNDEFINED_EPOCH:
        return OffsetTruncation(state.fetch_offset, completed=True)
    return AskLeaderEpochEnd(latest_epoch)


def truncation_for(
    diverged: Diverged, *, local_epoch_end: tuple[int, int], log_end_offset: int, fetch_offset: int
) -> OffsetTruncation:
    """Kafka's getOffsetTruncationState (KIP-101, KIP-279).

    `local_epoch_end` is the local epoch cache's end_offset_for(diverged.leader_epoch, LEO): the largest
    local epoch <= the leader's and where it ends.
    """
    if diverged.leader_end_offset < 0:
        # UNDEFINED_EPOCH_OFFSET: the leader knows nothing of the epoch. Fall back to the fetch offset (the
        # HW or the last truncation point), as Kafka does.
        return OffsetTruncation(min(fetch_offset, log_end_offset), completed=True)
    local_epoch, local_end_offset = local_epoch_end
    if local_end_offset == UNDEFINED_EPOCH_OFFSET:
        # We kept no epochs that old: the leader's end offset is the best bound there is.
        return OffsetTruncation(min(diverged.leader_end_offset, log_end_offset), completed=True)
    if local_epoch != diverged.leader_epoch:
        # KIP-279: we never saw the leader's epoch. Cut back to where our older epoch ends and ask again
        # about that one; one round per epoch we missed.
        return OffsetTruncation(min(local_end_offset, log_end_offset), completed=False)
    return OffsetTruncation(min(local_end_offset, diverged.leader_end_offset, log_end_offset), completed=True)


def state_after_truncation(
    state: PartitionFetchState, truncation: OffsetTruncation, *, log_end_offset: int, latest_epoch: int
) -> PartitionFetchState:
    """Fetch (or keep truncating) from the log's new end with its latest epoch as LastFetchedEpoch.

    The new end, not `truncation.offset`: truncate_to drops a batch straddling the point whole, and an
    append must start exactly at the LEO.
    """
    assert log_end_offset <= truncation.offset, (log_end_offset, truncation)
    last_epoch = None if latest_epoch == UNDEFINED_EPOCH else latest_epoch
    if truncation.completed:
        return state.fetching_from(log_end_offset, last_epoch)
    return state.truncating_from(log_end_offset, last_epoch)


# ------------------------------------------------------------------ answers


def is_current(sent: PartitionFetchState, current: PartitionFetchState | None) -> bool:
    """Whether an answer to a request built from `sent` may still be applied (Kafka applies a response only
    if the fetch offset is unchanged; an epoch answer only if the leader epoch is)."""
    return (
        current is not None
        and current.generation == sent.generation
        and current.phase is sent.phase
        and current.fetch_offset == sent.fetch_offset
        and current.current_leader_epoch == sent.current_leader_epoch
    )


def on_error(error_code: int) -> BackOff | Fail:
    """AbstractFetcherThread error handling for a partition whose request epoch is the current one."""
    assert error_code != ErrorCode.none
    if error_code == ErrorCode.fenced_leader_epoch:
        # onPartitionFenced: the leader is at a newer epoch than ours, so this follower state is obsolete;
        # wait for the replica manager to add the partition again with the new epoch.
        return Fail(error_code)
    # UNKNOWN_LEADER_EPOCH (the leader has not caught up with our epoch yet), NOT_LEADER_OR_FOLLOWER,
    # UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR and the rest: retry after replica.fetch.backoff.ms.
    return BackOff(error_code)


def on_fetch_result(
    sent: PartitionFetchState, current: PartitionFetchState | None, result: FetchPartitionResult
) -> PartitionAction:
    """What to do with one partition of a fetch response (AbstractFetcherThread.processFetchRequest)."""
    if not is_current(sent, current):
        return Drop()
    if result.error_code == ErrorCode.offset_out_of_range:
        return ResolveOutOfRange()
    if result.error_code != ErrorCode.none:
        return on_error(result.error_code)
    if result.diverging_epoch is not None:
        # Truncate and do not append, nor move the HW or log start offset from this response: they may
        # cover records we are about to remove (KAFKA-14704). The next fetch brings them.
        epoch, end_offset = result.diverging_epoch
        return Diverged(epoch, end_offset)
    records, last_epoch = whole_batches(result.records)
    return Append(
        records,
        last_epoch if last_epoch is not None else sent.last_fetched_epoch,
        result.high_watermark,
        result.log_start_offset,
    )


def on_epoch_answer(
    sent: PartitionFetchState,
    current: PartitionFetchState | None,
    error_code: int,
    epoch: int,
    end_offset: int,
) -> EpochAnswerAction:
    """What to do with one partition of an OffsetForLeaderEpoch answer (truncateToEpochEndOffsets)."""
    if not is_current(sent, current):
        return Drop()
    if error_code != ErrorCode.none:
        return on_error(error_code)
    return Diverged(epoch, end_offset)


def whole_batches(records: memoryview | None) -> tuple[memoryview, int | None]:
    """The leading whole batches of fetched data and the epoch of the last one (None if it has none).

    A leader may cut the last batch at the byte limit; like Kafka's follower we append what is whole and
    fetch the rest next time.
    """
    if records is None:
        return memoryview(b""), None
    end = 0
    last_epoch = None
    for batch in iter_batches(records, allow_partial_tail=True):
        end += batch.size_in_bytes
        last_epoch = batch.partition_leader_epoch
    if last_epoch is not None and last_epoch < 0:
        last_epoch = None  # a batch without a leader epoch (old message format) says nothing
    return records[:end], last_epoch


def follower_high_watermark(leader_high_watermark: int, log_start_offset: int, log_end_offset: int) -> int:
    """The leader's HW clamped to [log start, LEO]: a follower never claims more than it holds
    (ReplicaFetcherThread.processPartitionData, UnifiedLog.maybeUpdateHighWatermark)."""
    assert 0 <= log_start_offset <= log_end_offset
    return min(max(leader_high_watermark, log_start_offset), log_end_offset)


def follower_log_start_offset(
    leader_log_start_offset: int, log_start_offset: int, high_watermark: int
) -> int | None:
    """The log start to move up to, if any: the leader's (records it deleted are gone for everyone), but
    never past our HW, which PartitionLog.maybe_increment_log_start_offset refuses."""
    new_start = min(leader_log_start_offset, high_watermark)
    return new_start if new_start > log_start_offset else None


# ----------------------------------------------------------- out of range


def resolve_out_of_range(
    *, log_end_offset: int, leader_log_end_offset: int, leader_log_start_offset: int
) -> OutOfRangeResolution | BackOff:
    """Kafka's fetchOffsetAndTruncate, from the leader's ListOffsets earliest (-2) and latest (-1) answers."""
    if not 0 <= leader_log_start_offset <= leader_log_end_offset:
        return BackOff(ErrorCode.unknown_server_error)  # nonsense from the wire: ask again later
    if leader_log_end_offset < log_end_offset:
        # The leader is behind us (an unclean election): drop what it does not have.
        return TruncateTo(leader_log_end_offset)
    if leader_log_start_offset > log_end_offset:
        # We were away while the leader deleted everything we would fetch next: start over at its start.
        return TruncateFullyAndStartAt(leader_log_start_offset)
    return FetchFrom(max(leader_log_start_offset, log_end_offset))
