"""The quorum's RPCs as frozen dataclasses, in KRaft's field terms (KIP-595, KIP-630).

One partition (the metadata log) per message, so the topic/partition nesting of the wire schemas is left to
`codec`. An `Envelope` carries a message between nodes with the correlation id that pairs a response with
its request, as Kafka's request header does.
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

NO_LEADER = -1


@dataclass(frozen=True, slots=True, order=True)
class OffsetAndEpoch:
    """An (end) offset and the epoch of the entry before it; KRaft compares these as (epoch, offset)."""

    offset: int
    epoch: int

    def is_at_least(self, other: OffsetAndEpoch) -> bool:
        return (self.epoch, self.offset) >= (other.epoch, other.offset)


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One record of the metadata log: the epoch of the leader that appended it and its value.

    `control` marks KRaft's control records (LeaderChange), which state machines skip.
    """

    epoch: int
    value: bytes
    control: bool = False


@dataclass(frozen=True, slots=True)
class VoteRequest:
    cluster_id: str
    candidate_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int
    voter_id: int  # the receiver, so a misdirected request is refused; -1 in Vote v0, which lacks it
    pre_vote: bool = False  # KIP-996 (Vote v2): would you vote for me in candidate_epoch? Changes nothing.


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error_code: ErrorCode
    leader_id: int
    leader_epoch: int
    vote_granted: bool


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    cluster_id: str
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error_code: ErrorCode
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    cluster_id: str
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error_code: ErrorCode
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    cluster_id: str
    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """At most one of `diverging_epoch` and `snapshot_id` is set; `records` only when neither is."""

    error_code: ErrorCode
    leader_id: int
    leader_epoch: int
    high_watermark: int
    log_start_offset: int
    records: tuple[LogEntry, ...] = ()
    diverging_epoch: OffsetAndEpoch | None = None  # (end offset, epoch) of the leader's matching epoch
    snapshot_id: OffsetAndEpoch | None = None  # (end offset, epoch) of the snapshot to fetch instead


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    cluster_id: str
    replica_id: int
    current_leader_epoch: int
    snapshot_id: OffsetAndEpoch
    position: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    error_code: ErrorCode
    leader_id: int
    leader_epoch: int
    snapshot_id: OffsetAndEpoch
    size: int
    position: int
    unaligned_records: bytes


@dataclass(frozen=True, slots=True)
class DescribeQuorumRequest:
    pass


@dataclass(frozen=True, slots=True)
class ReplicaProgress:
    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@dataclass(frozen=True, slots=True)
class DescribeQuorumResponse:
    error_code: ErrorCode
    leader_id: int
    leader_epoch: int
    high_watermark: int
    current_voters: tuple[ReplicaProgress, ...]
    observers: tuple[ReplicaProgress, ...]


Request = (VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest | FetchSnapshotRequest
           | DescribeQuorumRequest)
Response = (VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse | FetchResponse
            | FetchSnapshotResponse | DescribeQuorumResponse)


@dataclass(frozen=True, slots=True)
class Envelope:
    source: int
    destination: int
    correlation_id: int
    message: Request | Response
