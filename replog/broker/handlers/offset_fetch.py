"""OffsetFetch (key 9), v1-9: a group's committed offsets (-1 where none); v8+ asks for several groups
(KIP-709). Null topics (v2+) asks for every committed partition. A group this broker does not coordinate
gets NOT_COORDINATOR (or COORDINATOR_LOAD_IN_PROGRESS) at the group level; before v2 there is no top-level
error, so each partition carries it."""

import dataclasses

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security.acls import Operation, ResourceType
from replog.server.dispatch import RequestContext

from .context import GroupCoordination


def handle(ctx: RequestContext, groups: GroupCoordination):
    version = ctx.api_version
    request = decode_request(ApiKey.OFFSET_FETCH, version, ctx.frame, ctx.body_offset)
    if version >= 8:
        answers = [_fetch(ctx, groups, g.group_id, g.topics, version) for g in request.groups]
        body = {"throttle_time": 0, "groups": answers}
    else:
        answer = _fetch(ctx, groups, request.group_id, request.topics, version)
        body = {"throttle_time": 0, "topics": answer["topics"], "error_code": answer["error_code"]}
    return [encode_response(ApiKey.OFFSET_FETCH, version, body)]


def _fetch(ctx: RequestContext, groups: GroupCoordination, group_id: str, topics, version: int) -> dict:
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    access = groups.access
    if not access.allows(ctx, Operation.DESCRIBE, ResourceType.GROUP, group_id):
        error, fetched = ErrorCode.group_authorization_failed, []
    else:
        error, fetched = groups.shell.coordinator.fetch_offsets(group_id, wanted)
    if error == ErrorCode.none:
        # DESCRIBE on each topic: refused partitions are answered as such, or left out of "all" (KafkaApis).
        describable = access.allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, (f.topic for f in fetched))
        fetched = [f if f.topic in describable else dataclasses.replace(
            f, offset=-1, leader_epoch=-1, metadata="", error=ErrorCode.topic_authorization_failed)
            for f in fetched if f.topic in describable or wanted is not None]
    if error != ErrorCode.none:
        if version < 2 and wanted is not None:  # no top-level error field: every partition carries it
            by_topic = _by_topic((t, p, -1, -1, "", error) for t, p in wanted)
            return {"group_id": group_id, "topics": by_topic, "error_code": error}
        return {"group_id": group_id, "topics": [], "error_code": error}
    rows = ((f.topic, f.partition, f.offset, f.leader_epoch, f.metadata, f.error) for f in fetched)
    return {"group_id": group_id, "topics": _by_topic(rows), "error_code": ErrorCode.none}


def _by_topic(rows) -> list[dict]:
    by_topic: dict[str, list[dict]] = {}
    for topic, partition, offset, leader_epoch, metadata, error in rows:
        by_topic.setdefault(topic, []).append({
            "partition_index": partition, "committed_offset": offset, "committed_leader_epoch": leader_epoch,
            "metadata": metadata, "error_code": error})
    return [{"name": t, "partitions": ps} for t, ps in by_topic.items()]
