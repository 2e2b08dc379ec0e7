"""Produce (key 0), v3-10: append each partition's batches as leader; answer per acks.

acks=0 sends no response (an error closes the connection so the client refreshes metadata, like Kafka);
acks=1 answers after the local append; for acks=all the replica manager parks a DelayedProduce until the
high watermark passes every appended partition's last offset, or the request timeout. From v10 a
NOT_LEADER_OR_FOLLOWER answer names the partition's current leader (KIP-951, leader_hints.py).
"""

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.messages import encode_response
from replog.protocol.produce import ProducePartitionResponse, decode_produce_request, encode_produce_response
from replog.protocol.topics import OFFSETS_TOPIC
from replog.security.acls import Operation, ResourceType
from replog.server.completion import Completion
from replog.server.dispatch import RequestContext

from ..access import Access
from ..leader_hints import current_leader, node_endpoints
from ..metadata import MetadataImage
from ..replica_manager import VALID_ACKS, AppendResults, PartitionAppendResult, ReplicaManager
from .context import TopicAdmin

FIRST_LEADER_HINT_VERSION = 10  # KIP-951: CurrentLeader per partition, NodeEndpoints per response


def handle(ctx: RequestContext, replicas: ReplicaManager, access: Access, topics: TopicAdmin):
    request = decode_produce_request(ctx.api_version, ctx.frame, ctx.body_offset)
    entries = [(topic.name, p.index, p.records) for topic in request.topics for p in topic.partitions]
    if request.transactional_id is not None and request.acks in VALID_ACKS:
        results: AppendResults | Completion = {
            (topic, index): PartitionAppendResult(ErrorCode.transactional_id_authorization_failed,
                                                  error_message="transactions are not supported")
            for topic, index, _ in entries}
    else:
        # Refused: topics the principal may not WRITE, and internal topics, as Kafka's (a record the group
        # coordinator cannot decode would keep the partition's groups from loading).
        writable = access.allowed(ctx, Operation.WRITE, ResourceType.TOPIC, [topic.name for topic in request.topics])
        refusals = {(topic, index): _refusal(topic, topic in writable) for topic, index, _ in entries
                    if topic == OFFSETS_TOPIC or topic not in writable}
        if refusals:
            entries = [e for e in entries if (e[0], e[1]) not in refusals]
        results = replicas.append_records(entries, request.acks, request.timeout_ms)
        if refusals:
            results = results.then(lambda r: {**r, **refusals}) if isinstance(results, Completion) else {
                **results, **refusals}
    if request.acks == 0:
        assert isinstance(results, dict)  # acks=0 never waits
        if any(r.error_code != ErrorCode.none for r in results.values()):
            ctx.close_connection()
        return None
    hints = _LeaderHints(ctx, replicas, topics.image) if ctx.api_version >= FIRST_LEADER_HINT_VERSION else None
    if isinstance(results, dict):
        return [_encode(ctx.api_version, results, hints)]
    # Encoded in the call that moves the HW (server/completion.py), Kafka's DelayedProduce responseCallback.
    return results.then(lambda r: [_encode(ctx.api_version, r, hints)])


def _refusal(topic: str, writable: bool) -> PartitionAppendResult:
    if not writable:  # the principal may not WRITE the topic (KafkaApis.handleProduceRequest)
        return PartitionAppendResult(ErrorCode.topic_authorization_failed)
    return PartitionAppendResult(ErrorCode.invalid_topic_exception,
                                 error_message=f"cannot append to internal topic {topic}")


class _LeaderHints:
    """Read when the answer is encoded (after an acks=all wait, leadership may have moved meanwhile)."""

    def __init__(self, ctx: RequestContext, replicas: ReplicaManager, image: MetadataImage) -> None:
        self._listener_name = ctx.session.listener_name
        self._replicas = replicas
        self._image = image
        self.leaders: set[int] = set()

    def current_leader(self, topic: str, index: int) -> dict:
        leader = current_leader(self._replicas.get_partition(topic, index), self._image, topic, index)
        self.leaders.add(leader.leader_id)
        return {"leader_id": leader.leader_id, "leader_epoch": leader.leader_epoch}

    def node_endpoints(self) -> list[dict]:
        return node_endpoints(self._image, self.leaders, self._listener_name)


def _encode(version: int, results: AppendResults, hints: _LeaderHints | None) -> bytes:
    by_topic: dict[str, list[ProducePartitionResponse]] = {}
    for (topic, index), r in results.items():
        info = r.info
        if info is not None:
            response = ProducePartitionResponse(index, r.error_code, info.first_offset, -1, info.log_start_offset,
                                                r.error_message)
        elif hints is not None and r.error_code == ErrorCode.not_leader_or_follower:
            return _encode_with_leader_hints(version, results, hints)
        else:
            response = ProducePartitionResponse(index, r.error_code, error_message=r.error_message)
        partitions = by_topic.get(topic)
        if partitions is None:
            by_topic[topic] = [response]
        else:
            partitions.append(response)
    return encode_produce_response(version, by_topic)


def _encode_with_leader_hints(version: int, results: AppendResults, hints: _LeaderHints) -> bytes:
    """v10+ with a NOT_LEADER_OR_FOLLOWER partition: its CurrentLeader and the NodeEndpoints (KIP-951),
    tagged fields encoded by kio."""
    by_topic: dict[str, list[dict]] = {}
    for (topic, index), r in results.items():
        info = r.info
        entry = {
            "index": index,
            "error_code": r.error_code,
            "base_offset": info.first_offset if info else -1,
            "log_append_time": None,
            "log_start_offset": info.log_start_offset if info else -1,
            "record_errors": [],
            "error_message": r.error_message,
        }
        if r.error_code == ErrorCode.not_leader_or_follower:
            entry["current_leader"] = hints.current_leader(topic, index)
        by_topic.setdefault(topic, []).append(entry)
    body = {"responses": [{"name": t, "partition_responses": ps} for t, ps in by_topic.items()],
            "throttle_time": 0}
    if hints.leaders:
        body["node_endpoints"] = hints.node_endpoints()
    return encode_response(ApiKey.PRODUCE, version, body)
