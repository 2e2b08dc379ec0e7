"""What goes into the group rules and what comes out: requests as plain values (the broker's handlers decode
the wire versions into these), and an Outcome of replies, timers and log writes for the shell to carry out.

Replies are addressed by the request id the shell gave the request, because a JoinGroup or SyncGroup may be
answered by a later event (another member's join, a timer, a write completing). Every request is answered
exactly once; the shell keeps each parked request until its reply comes out.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from replog.coordinator.group import Protocols
from replog.coordinator.records import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey

NO_GENERATION = -1
UNKNOWN_MEMBER_ID = ""

# ------------------------------------------------------------------ requests


@dataclass(frozen=True, slots=True)
class JoinRequest:
    request_id: int
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int  # v0 has none: the decoder passes the session timeout, as Kafka does
    protocol_type: str
    protocols: Protocols
    require_known_member_id: bool = True  # JoinGroup v4+ (KIP-394)
    support_skipping_assignment: bool = False  # JoinGroup v9+


@dataclass(frozen=True, slots=True)
class SyncRequest:
    request_id: int
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None  # v5+
    protocol_name: str | None = None  # v5+
    assignments: tuple[tuple[str, bytes], ...] = ()  # from the leader only


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    request_id: int
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveRequest:
    """v0-2 name one member; v3+ a batch (KIP-345), possibly by instance id alone (an admin's removal)."""

    request_id: int
    group_id: str
    members: tuple[LeavingMember, ...]


# ------------------------------------------------------------------- replies


@dataclass(frozen=True, slots=True)
class JoinResult:
    request_id: int
    error: ErrorCode
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: tuple[
        tuple[str, str | None, bytes], ...
    ] = ()  # for the leader: (member id, instance id, metadata)


@dataclass(frozen=True, slots=True)
class SyncResult:
    request_id: int
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    request_id: int
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveResult:
    request_id: int
    error: ErrorCode
    members: tuple[tuple[LeavingMember, ErrorCode], ...] = ()


@dataclass(frozen=True, slots=True)
class CommitResult:
    request_id: int
    partitions: tuple[tuple[str, int, ErrorCode], ...]  # (topic, partition, error)


Reply = JoinResult | SyncResult | HeartbeatResult | LeaveResult | CommitResult

# -------------------------------------------------------------------- timers


class TimerKind(enum.Enum):
    HEARTBEAT = "heartbeat"  # a member's session (or new-member join) expiry
    PENDING_MEMBER = "pending-member"  # a KIP-394 member id that was handed out but not used yet
    JOIN = "join"  # the rebalance: DelayedJoin or InitialDelayedJoin
    SYNC = "sync"  # members that got their JoinGroup answer must SyncGroup before this


@dataclass(frozen=True, slots=True)
class Timer:
    """Call the group's on_timer with this value at deadline_ms. A timer replaces any earlier one with the
    same key; one that fires after being superseded is recognised as stale and does nothing."""

    kind: TimerKind
    group_id: str
    member_id: str  # "" for the group's own timers
    deadline_ms: int

    @property
    def key(self) -> tuple[TimerKind, str, str]:
        return (self.kind, self.group_id, self.member_id)


# -------------------------------------------------------------------- writes


class AfterStore(enum.Enum):
    """What the rules do once a group record is replicated (or failed): see syncing.on_group_stored."""

    PROPAGATE_ASSIGNMENT = "propagate-assignment"  # the leader's SyncGroup: go Stable, answer every member
    ANSWER_STATIC_REJOIN = "answer-static-rejoin"  # a static member replaced its member id in a Stable group
    NOTHING = "nothing"  # the group became Empty; a failed write only leaves an older record behind


@dataclass(frozen=True, slots=True)
class StaticRejoin:
    """What a static member's rejoin changed, to answer it, or undo it if the write fails."""

    request_id: int
    instance_id: str
    old_member_id: str
    new_member_id: str
    old_protocols: Protocols
    old_rebalance_timeout_ms: int
    old_session_timeout_ms: int
    leader_before: str | None
    support_skipping_assignment: bool


@dataclass(frozen=True, slots=True)
class StoreGroup:
    """Append the group's record to its __consumer_offsets partition; once replicated as with acks=all (or
    failed), pass this value back to on_group_stored."""

    group_id: str
    generation_id: int
    value: GroupMetadataValue
    after: AfterStore
    static_rejoin: StaticRejoin | None = None


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset as the coordinator keeps it (and as OffsetCommitValue stores it)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None  # only from OffsetCommit v2-v4 with a retention time


@dataclass(frozen=True, slots=True)
class StoreOffsets:
    """Append these commits to the group's partition; once replicated as with acks=all (or failed), pass
    this value back to offsets.on_offsets_stored, which applies them and answers the commit."""

    request_id: int
    group_id: str
    offsets: tuple[tuple[str, int, OffsetAndMetadata], ...]
    refused: tuple[tuple[str, int, ErrorCode], ...] = ()  # partitions answered with an error regardless


@dataclass(frozen=True, slots=True)
class AppendTombstones:
    """Append tombstones (null values) for these keys: deleted offsets or a deleted group. Nothing waits on
    them; the state already forgot the keys."""

    group_id: str
    keys: tuple[OffsetCommitKey | GroupMetadataKey, ...]


Write = StoreGroup | StoreOffsets | AppendTombstones

# ------------------------------------------------------------------- outcome


@dataclass(slots=True)
class Outcome:
    replies: list[Reply] = field(default_factory=list)
    timers: list[Timer] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
