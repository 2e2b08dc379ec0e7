"""Committed offsets: the store, OffsetCommit validation, OffsetFetch answers, retention and OffsetDelete
(Kafka's handleCommitOffsets/validateOffsetCommit, GroupMetadataManager.getOffsets, removeExpiredOffsets and
handleDeleteOffsets).

A commit is applied to the store only once its records are replicated (on_offsets_stored), so an OffsetFetch
never returns an offset a failover could lose.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from replog.coordinator.config import GroupCoordinatorConfig
from replog.coordinator.group import ClassicGroup, GroupState
from replog.coordinator.outcomes import (
    UNKNOWN_MEMBER_ID,
    AppendTombstones,
    CommitResult,
    OffsetAndMetadata,
    Outcome,
    StoreOffsets,
)
from replog.coordinator.rebalance import schedule_heartbeat
from replog.coordinator.records import NO_LEADER_EPOCH, OffsetCommitKey

S = GroupState
TopicPartition = tuple[str, int]
NO_OFFSET = -1


@dataclass(frozen=True, slots=True)
class CommitPartition:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str | None = ""  # null is stored as ""


@dataclass(frozen=True, slots=True)
class CommitRequest:
    request_id: int
    group_id: str
    generation_id: int  # -1 for a commit outside group management (a simple consumer, an admin)
    member_id: str
    partitions: tuple[CommitPartition, ...]
    group_instance_id: str | None = None
    retention_time_ms: int = -1  # OffsetCommit v2-v4; -1 is the broker's retention


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error: ErrorCode = ErrorCode.none


@dataclass(slots=True)
class OffsetStore:
    """Committed offsets per group: what OffsetFetch answers and what a new leader loads."""

    groups: dict[str, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)

    def get(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        return self.groups.get(group_id, {})

    def put(self, group_id: str, tp: TopicPartition, offset: OffsetAndMetadata) -> None:
        self.groups.setdefault(group_id, {})[tp] = offset

    def remove(self, group_id: str, tp: TopicPartition) -> bool:
        offsets = self.groups.get(group_id)
        if offsets is None or offsets.pop(tp, None) is None:
            return False
        if not offsets:
            del self.groups[group_id]
        return True

    def remove_group(self, group_id: str) -> list[TopicPartition]:
        return sorted(self.groups.pop(group_id, {}))


# ------------------------------------------------------------------- commit


def commit_error(group: ClassicGroup, request: CommitRequest) -> ErrorCode | None:
    """Kafka's validateOffsetCommit (not transactional)."""
    if group.is_(S.DEAD):
        return ErrorCode.coordinator_not_available
    if request.generation_id < 0 and group.is_(S.EMPTY):
        return None  # outside group management: allowed while no member owns the partitions
    if (
        request.generation_id >= 0
        or request.member_id != UNKNOWN_MEMBER_ID
        or request.group_instance_id is not None
    ):
        error = group.current_member_error(request.member_id, request.group_instance_id)
        if error is not None:
            return error
        return None if request.generation_id == group.generation_id else ErrorCode.illegal_generation
    if not group.is_(S.EMPTY):
        return ErrorCode.unknown_member_id  # only members commit for a group that has some
    return None


def on_commit(
    group: ClassicGroup, request: CommitRequest, now_ms: int, config: GroupCoordinatorConfig
) -> Outcome:
    """`group` exists: the caller creates an Empty one for a generation -1 commit to an unknown group, and
    answers ILLEGAL_GENERATION for any other commit to an unknown group."""
    out = Outcome()
    error = commit_error(group, request)
    if error is None and group.is_(S.COMPLETING_REBALANCE):
        # The member has the new generation but no assignment yet; it retries after SyncGroup.
        error = ErrorCode.rebalance_in_progress
    if error is not None:
        out.replies.append(refuse_commit(request, error))
        return out
    if group.state in (S.STABLE, S.PREPARING_REBALANCE):
        # A commit is a sign of life. During a rebalance commits are still taken; the heartbeat answer tells
        # the member to rejoin.
        member = group.members[request.member_id]
        schedule_heartbeat(group, member, member.session_timeout_ms, now_ms, out)
    accepted, refused = [], []
    for p in request.partitions:
        metadata = p.metadata or ""
        if len(metadata.encode()) > config.offset_metadata_max_bytes:
            refused.append((p.topic, p.partition, ErrorCode.offset_metadata_too_large))
            continue
        expire = now_ms + request.retention_time_ms if request.retention_time_ms >= 0 else None
        accepted.append(
            (p.topic, p.partition, OffsetAndMetadata(p.offset, p.leader_epoch, metadata, now_ms, expire))
        )
    if accepted:
        out.writes.append(StoreOffsets(request.request_id, request.group_id, tuple(accepted), tuple(refused)))
    else:
        out.replies.append(CommitResult(request.request_id, tuple(refused)))
    return out


def refuse_commit(request: CommitRequest, error: ErrorCode) -> CommitResult:
    return CommitResult(request.request_id, tuple((p.topic, p.partition, error) for p in request.partitions))


def commit_error_for_client(error: ErrorCode) -> ErrorCode:
    """Kafka's maybeConvertOffsetCommitError: what a failed offsets write tells the committer. A write that
    was not replicated in time (acks=all timed out, or the ISR shrank under it) is retriable at the same
    coordinator, as Kafka's group coordinator answers it."""
    if error in (ErrorCode.unknown_topic_or_partition, ErrorCode.not_enough_replicas,
                 ErrorCode.not_enough_replicas_after_append, ErrorCode.request_timed_out):
        return ErrorCode.coordinator_not_available
    if error in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
        return ErrorCode.not_coordinator
    if error in (ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.invalid_fetch_size):
        return ErrorCode.invalid_commit_offset_size
    return error


def on_offsets_stored(store: OffsetStore, write: StoreOffsets, error: ErrorCode) -> CommitResult:
    """The commit's records are replicated (or failed): apply them, and answer the commit."""
    error = commit_error_for_client(error)
    if error == ErrorCode.none:
        for topic, partition, offset in write.offsets:
            store.put(write.group_id, (topic, partition), offset)
    written = tuple((topic, partition, error) for topic, partition, _ in write.offsets)
    return CommitResult(write.request_id, written + write.refused)


# -------------------------------------------------------------------- fetch


def fetch_offsets(
    store: OffsetStore, group_id: str, partitions: list[TopicPartition] | None
) -> list[FetchedOffset]:
    """OffsetFetch for one group: the named partitions (-1 for those without a commit), or with None every
    committed partition. An unknown group is not an error: a group may commit without group management."""
    offsets = store.get(group_id)
    wanted = sorted(offsets) if partitions is None else partitions
    fetched = []
    for topic, partition in wanted:
        committed = offsets.get((topic, partition))
        if committed is None:
            fetched.append(FetchedOffset(topic, partition, NO_OFFSET, NO_LEADER_EPOCH, ""))
        else:
            fetched.append(
                FetchedOffset(topic, partition, committed.offset, committed.leader_epoch, committed.metadata)
            )
    return fetched


# ---------------------------------------------------------------- retention


def expired_offsets(
    group: ClassicGroup | None,
    offsets: dict[TopicPartition, OffsetAndMetadata],
    now_ms: int,
    retention_ms: int,
) -> list[TopicPartition]:
    """Kafka 2.1+ retention (KIP-211): a group's offsets expire only once it is Empty, counted from when it
    became Empty; a Stable consumer group loses only offsets of topics it no longer subscribes to; offsets
    committed without group management count from their commit."""

    def expired(offset: OffsetAndMetadata, base_ms: int) -> bool:
        if offset.expire_timestamp_ms is not None:  # an explicit retention time (OffsetCommit v2-v4)
            return now_ms >= offset.expire_timestamp_ms
        return now_ms - base_ms >= retention_ms

    if group is None or group.protocol_type is None:
        return sorted(tp for tp, o in offsets.items() if expired(o, o.commit_timestamp_ms))
    if group.is_(S.EMPTY):
        # No state timestamp means the group was loaded from an old record: count from the commit then.
        def base(o: OffsetAndMetadata) -> int:
            return group.state_timestamp_ms if group.state_timestamp_ms >= 0 else o.commit_timestamp_ms

        return sorted(tp for tp, o in offsets.items() if expired(o, base(o)))
    if group.is_consumer_group and group.subscribed_topics is not None and group.is_(S.STABLE):
        subscribed = group.subscribed_topics
        return sorted(
            tp for tp, o in offsets.items() if tp[0] not in subscribed and expired(o, o.commit_timestamp_ms)
        )
    return []


def expire_group_offsets(
    group: ClassicGroup | None, group_id: str, store: OffsetStore, now_ms: int, config: GroupCoordinatorConfig
) -> tuple[list[TopicPartition], bool]:
    """Drop the group's expired offsets; returns them, and whether the group is now gone (Empty and without
    offsets: Kafka marks it Dead and writes its tombstone). Called every
    offsets.retention.check.interval.ms."""
    for tp in (expired := expired_offsets(group, store.get(group_id), now_ms, config.offsets_retention_ms)):
        store.remove(group_id, tp)
    # A group with KIP-394 member ids handed out is about to get members: keep it.
    empty = group is None or (group.is_(S.EMPTY) and not group.pending_members)
    gone = empty and not store.get(group_id)
    return expired, gone


def tombstones(group_id: str, partitions: list[TopicPartition]) -> AppendTombstones:
    return AppendTombstones(group_id, tuple(OffsetCommitKey(group_id, t, p) for t, p in partitions))


# ------------------------------------------------------------------- delete


def delete_offsets(
    group: ClassicGroup | None, store: OffsetStore, group_id: str, partitions: list[TopicPartition]
) -> tuple[ErrorCode, list[tuple[str, int, ErrorCode]], AppendTombstones | None]:
    """OffsetDelete: (group error, per-partition errors, tombstones to write). An Empty group's offsets go;
    a rebalancing or Stable consumer group keeps those of topics it subscribes to."""
    if group is None or group.is_(S.DEAD):
        return ErrorCode.group_id_not_found, [], None
    if group.is_(S.EMPTY):
        eligible, subscribed = list(partitions), []
    elif group.is_consumer_group:
        eligible = [tp for tp in partitions if not group.is_subscribed_to(tp[0])]
        subscribed = [tp for tp in partitions if group.is_subscribed_to(tp[0])]
    else:
        return ErrorCode.non_empty_group, [], None
    removed = [tp for tp in eligible if store.remove(group_id, tp)]
    errors = [(t, p, ErrorCode.none) for t, p in eligible]
    errors += [(t, p, ErrorCode.group_subscribed_to_topic) for t, p in subscribed]
    return ErrorCode.none, errors, tombstones(group_id, removed) if removed else None
