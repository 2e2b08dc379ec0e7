"""The quorum's messages to and from Kafka's wire schemas (kio), for the `__cluster_metadata` partition.

Versions are the ones Kafka 4.x speaks for KRaft without KIP-853 (dynamic quorums): Vote v2 (PreVote),
BeginQuorumEpoch v0, EndQuorumEpoch v0, FetchSnapshot v0, Fetch v16 and DescribeQuorum v0-v2. Log entries
travel as record batch v2, one batch per run of entries with the same epoch and kind; the batch's partition
leader epoch is the entry epoch and control entries (LeaderChange) go in control batches.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from replog.protocol import messages as wire
from replog.protocol.records import RecordBatch, build_batch, decode_records, iter_batches
from replog.raft import messages as m
from replog.raft.messages import LogEntry, OffsetAndEpoch

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID
METADATA_PARTITION = 0

FETCH, VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, DESCRIBE_QUORUM, FETCH_SNAPSHOT = 1, 52, 53, 54, 55, 59
VERSIONS = {VOTE: 2, BEGIN_QUORUM_EPOCH: 0, END_QUORUM_EPOCH: 0, FETCH_SNAPSHOT: 0, FETCH: 16, DESCRIBE_QUORUM: 2}
DESCRIBE_QUORUM_VERSIONS = (0, 1, 2)

_CONTROL_BIT = 0x20
_ATTRIBUTES_OFFSET, _CRC_OFFSET = 21, 17


class CodecError(ValueError):
    """A message that is well-formed Kafka but not a single-partition metadata quorum message."""


def api_key_of(message: m.Request | m.Response) -> int:
    return _API_KEYS[type(message)]


# ------------------------------------------------------------------ records


def encode_entries(base_offset: int, entries: tuple[LogEntry, ...]) -> bytes:
    out = bytearray()
    start = 0
    while start < len(entries):
        end = start
        while end < len(entries) and (entries[end].epoch, entries[end].control) == (entries[start].epoch,
                                                                                      entries[start].control):
            end += 1
        batch = bytearray(build_batch([(None, entry.value, [], 0) for entry in entries[start:end]],
                                      base_offset=base_offset + start, partition_leader_epoch=entries[start].epoch))
        if entries[start].control:
            attributes = int.from_bytes(batch[_ATTRIBUTES_OFFSET:_ATTRIBUTES_OFFSET + 2], "big") | _CONTROL_BIT
            batch[_ATTRIBUTES_OFFSET:_ATTRIBUTES_OFFSET + 2] = attributes.to_bytes(2, "big")
            crc = RecordBatch(memoryview(batch)).compute_crc()
            batch[_CRC_OFFSET:_CRC_OFFSET + 4] = crc.to_bytes(4, "big")
        out += batch
        start = end
    return bytes(out)


def decode_entries(data: bytes, expected_base_offset: int) -> tuple[LogEntry, ...]:
    """Entries from record batches that must start at `expected_base_offset` and be dense and valid."""
    entries: list[LogEntry] = []
    for batch in iter_batches(data):
        if not batch.is_crc_valid():
            raise CodecError(f"batch at offset {batch.base_offset}: CRC mismatch")
        if batch.base_offset != expected_base_offset + len(entries):
            raise CodecError(f"batch at offset {batch.base_offset}, expected {expected_base_offset + len(entries)}")
        control = batch.is_control
        if control:  # decode_records skips control batches (transaction markers); ours hold LeaderChange
            plain = bytearray(batch.buffer)
            plain[_ATTRIBUTES_OFFSET + 1] &= ~_CONTROL_BIT & 0xFF
            batch = RecordBatch(memoryview(plain))
        entries += [LogEntry(batch.partition_leader_epoch, record.value or b"", control)
                    for record in decode_records(batch)]
    return tuple(entries)


# ------------------------------------------------------------------ encode


def _topic(key: str, partition: dict[str, Any], id_key: str | None = None) -> list[dict[str, Any]]:
    topic = {key: METADATA_TOPIC, "partitions": [partition]}
    if id_key is not None:
        topic[id_key] = METADATA_TOPIC_ID
    return [topic]


def encode_request(message: m.Request, version: int | None = None) -> tuple[int, int, bytes]:
    """(api key, version, body) for `message`."""
    api_key = api_key_of(message)
    version = VERSIONS[api_key] if version is None else version
    match message:
        case m.VoteRequest():
            data = {"cluster_id": message.cluster_id, "voter_id": message.voter_id, "topics": _topic("topic_name", {
                "partition_index": METADATA_PARTITION, "replica_epoch": message.candidate_epoch,
                "replica_id": message.candidate_id, "last_offset_epoch": message.last_offset_epoch,
                "last_offset": message.last_offset, "replica_directory_id": None, "voter_directory_id": None,
                "pre_vote": message.pre_vote})}
        case m.BeginQuorumEpochRequest() | m.EndQuorumEpochRequest():
            partition = {"partition_index": METADATA_PARTITION, "leader_id": message.leader_id,
                         "leader_epoch": message.leader_epoch}
            if isinstance(message, m.EndQuorumEpochRequest):
                partition["preferred_successors"] = message.preferred_successors
            data = {"cluster_id": message.cluster_id, "topics": _topic("topic_name", partition)}
        case m.FetchRequest():
            data = {"cluster_id": message.cluster_id, "replica_state": {"replica_id": message.replica_id},
                    "max_wait": message.max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                    "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
                    "topics": _topic("topic", {
                        "partition": METADATA_PARTITION, "current_leader_epoch": message.current_leader_epoch,
                        "fetch_offset": message.fetch_offset, "last_fetched_epoch": message.last_fetched_epoch,
                        "log_start_offset": -1, "partition_max_bytes": 1 << 20}, id_key="topic_id")}
        case m.FetchSnapshotRequest():
            data = {"cluster_id": message.cluster_id, "replica_id": message.replica_id, "max_bytes": message.max_bytes,
                    "topics": _topic("name", {
                        "partition": METADATA_PARTITION, "current_leader_epoch": message.current_leader_epoch,
                        "snapshot_id": {"end_offset": message.snapshot_id.offset, "epoch": message.snapshot_id.epoch},
                        "position": message.position})}
        case m.DescribeQuorumRequest():
            data = {"topics": _topic("topic_name", {"partition_index": METADATA_PARTITION})}
    return api_key, version, wire.encode_request(api_key, version, data)


def _describe_replica(replica: m.ReplicaProgress) -> dict[str, Any]:
    return {"replica_id": replica.replica_id, "replica_directory_id": uuid.UUID(int=0),
            "log_end_offset": replica.log_end_offset,
            "last_fetch_timestamp": replica.last_fetch_timestamp,
            "last_caught_up_timestamp": replica.last_caught_up_timestamp}


def encode_response(message: m.Response, version: int | None = None, fetch_offset: int = 0) -> bytes:
    """The body of `message`; a FetchResponse's records start at `fetch_offset`, the request's."""
    api_key = api_key_of(message)
    version = VERSIONS[api_key] if version is None else version
    leader = {"leader_id": message.leader_id, "leader_epoch": message.leader_epoch}
    match message:
        case m.VoteResponse():
            data = {"error_code": ErrorCode.none, "topics": _topic("topic_name", {
                "partition_index": METADATA_PARTITION, "error_code": message.error_code, **leader,
                "vote_granted": message.vote_granted})}
        case m.BeginQuorumEpochResponse() | m.EndQuorumEpochResponse():
            data = {"error_code": ErrorCode.none, "topics": _topic("topic_name", {
                "partition_index": METADATA_PARTITION, "error_code": message.error_code, **leader})}
        case m.FetchResponse():
            partition = {"partition_index": METADATA_PARTITION, "error_code": message.error_code,
                         "high_watermark": message.high_watermark, "last_stable_offset": -1,
                         "log_start_offset": message.log_start_offset, "current_leader": leader,
                         "aborted_transactions": [], "preferred_read_replica": -1,
                         "records": encode_entries(fetch_offset, message.records)}
            if message.diverging_epoch is not None:
                partition["diverging_epoch"] = {"epoch": message.diverging_epoch.epoch,
                                                "end_offset": message.diverging_epoch.offset}
            if message.snapshot_id is not None:
                partition["snapshot_id"] = {"end_offset": message.snapshot_id.offset,
                                            "epoch": message.snapshot_id.epoch}
            data = {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0,
                    "responses": _topic("topic", partition, id_key="topic_id")}
        case m.FetchSnapshotResponse():
            data = {"throttle_time": 0, "error_code": ErrorCode.none, "topics": _topic("name", {
                "index": METADATA_PARTITION, "error_code": message.error_code,
                "snapshot_id": {"end_offset": message.snapshot_id.offset, "epoch": message.snapshot_id.epoch},
                "current_leader": leader, "size": message.size, "position": message.position,
                "unaligned_records": message.unaligned_records})}
        case m.DescribeQuorumResponse():
            data = {"error_code": ErrorCode.none, "error_message": None, "topics": _topic("topic_name", {
                "partition_index": METADATA_PARTITION, "error_code": message.error_code, "error_message": None,
                **leader, "high_watermark": message.high_watermark,
                "current_voters": [_describe_replica(r) for r in message.current_voters],
                "observers": [_describe_replica(r) for r in message.observers]}), "nodes": []}
    return wire.encode_response(api_key, version, data)


# ------------------------------------------------------------------ decode


def _only_partition(entity: Any, topics_field: str, name_field: str) -> Any:
    topics = getattr(entity, topics_field)
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        raise CodecError(f"{type(entity).__name__}: expected one topic with one partition")
    topic = topics[0]
    name = getattr(topic, name_field)
    if name not in (METADATA_TOPIC, METADATA_TOPIC_ID):
        raise CodecError(f"{type(entity).__name__}: topic {name!r} is not {METADATA_TOPIC}")
    return topic.partitions[0]


def decode_request(api_key: int, version: int, body: bytes) -> m.Request:
    entity = wire.decode_request(api_key, version, body, 0)
    if api_key == VOTE:
        p = _only_partition(entity, "topics", "topic_name")
        return m.VoteRequest(entity.cluster_id or "", p.replica_epoch, p.replica_id, p.last_offset_epoch,
                             p.last_offset, getattr(entity, "voter_id", -1), getattr(p, "pre_vote", False))
    if api_key in (BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH):
        p = _only_partition(entity, "topics", "topic_name")
        if api_key == BEGIN_QUORUM_EPOCH:
            return m.BeginQuorumEpochRequest(entity.cluster_id or "", p.leader_id, p.leader_epoch)
        return m.EndQuorumEpochRequest(entity.cluster_id or "", p.leader_id, p.leader_epoch,
                                       tuple(p.preferred_successors))
    if api_key == FETCH:
        p = _only_partition(entity, "topics", "topic_id")
        return m.FetchRequest(entity.cluster_id or "", entity.replica_state.replica_id, p.current_leader_epoch,
                              p.fetch_offset, p.last_fetched_epoch, wire.millis(entity.max_wait))
    if api_key == FETCH_SNAPSHOT:
        p = _only_partition(entity, "topics", "name")
        return m.FetchSnapshotRequest(entity.cluster_id or "", entity.replica_id, p.current_leader_epoch,
                                      OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch), p.position,
                                      entity.max_bytes)
    if api_key == DESCRIBE_QUORUM:
        _only_partition(entity, "topics", "topic_name")
        return m.DescribeQuorumRequest()
    raise CodecError(f"API key {api_key} is not a quorum API")


def _progress(replica: Any) -> m.ReplicaProgress:
    # DescribeQuorum v0 has no timestamps; Kafka reports -1 for unknown ones.
    return m.ReplicaProgress(replica.replica_id, replica.log_end_offset,
                             getattr(replica, "last_fetch_timestamp", -1),
                             getattr(replica, "last_caught_up_timestamp", -1))


def decode_response(api_key: int, version: int, body: bytes, fetch_offset: int = 0) -> m.Response:
    """The response to a request of `api_key`; for Fetch, `fetch_offset` is the request's."""
    entity = wire.decode_response(api_key, version, body, 0)
    if api_key == VOTE:
        p = _only_partition(entity, "topics", "topic_name")
        return m.VoteResponse(p.error_code, p.leader_id, p.leader_epoch, p.vote_granted)
    if api_key in (BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH):
        p = _only_partition(entity, "topics", "topic_name")
        cls = m.BeginQuorumEpochResponse if api_key == BEGIN_QUORUM_EPOCH else m.EndQuorumEpochResponse
        return cls(p.error_code, p.leader_id, p.leader_epoch)
    if api_key == FETCH:
        p = _only_partition(entity, "responses", "topic_id")
        diverging = (OffsetAndEpoch(p.diverging_epoch.end_offset, p.diverging_epoch.epoch)
                     if p.diverging_epoch is not None and p.diverging_epoch.epoch >= 0 else None)
        snapshot = (OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch)
                    if p.snapshot_id is not None and p.snapshot_id.end_offset >= 0 else None)
        records = decode_entries(bytes(p.records), fetch_offset) if p.records else ()
        return m.FetchResponse(p.error_code, p.current_leader.leader_id, p.current_leader.leader_epoch,
                               p.high_watermark, p.log_start_offset, records, diverging, snapshot)
    if api_key == FETCH_SNAPSHOT:
        p = _only_partition(entity, "topics", "name")
        return m.FetchSnapshotResponse(p.error_code, p.current_leader.leader_id, p.current_leader.leader_epoch,
                                       OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch), p.size,
                                       p.position, bytes(p.unaligned_records))
    if api_key == DESCRIBE_QUORUM:
        p = _only_partition(entity, "topics", "topic_name")
        return m.DescribeQuorumResponse(p.error_code, p.leader_id, p.leader_epoch, p.high_watermark,
                                        tuple(map(_progress, p.current_voters)), tuple(map(_progress, p.observers)))
    raise CodecError(f"API key {api_key} is not a quorum API")


_API_KEYS: dict[type, int] = {
    m.VoteRequest: VOTE, m.VoteResponse: VOTE,
    m.BeginQuorumEpochRequest: BEGIN_QUORUM_EPOCH, m.BeginQuorumEpochResponse: BEGIN_QUORUM_EPOCH,
    m.EndQuorumEpochRequest: END_QUORUM_EPOCH, m.EndQuorumEpochResponse: END_QUORUM_EPOCH,
    m.FetchRequest: FETCH, m.FetchResponse: FETCH,
    m.FetchSnapshotRequest: FETCH_SNAPSHOT, m.FetchSnapshotResponse: FETCH_SNAPSHOT,
    m.DescribeQuorumRequest: DESCRIBE_QUORUM, m.DescribeQuorumResponse: DESCRIBE_QUORUM,
}
