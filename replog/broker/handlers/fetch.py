"""Fetch (key 1), v4-12: read whole batches as file slices, to the HW for consumers and the LEO for followers.

One path serves both, as in Kafka: a fetch with a replica id is a follower replicating (a cluster action,
so only an authenticated broker may send one), which reports its LEO to the leader with every request.
KIP-74 limits: the response's max_bytes and each partition's max bytes, except that the first partition
with data returns at least one whole batch. The response is sent at once if max_wait <= 0, min_bytes is
met, any partition has an error or a diverging epoch (facts §5); otherwise the replica manager parks a
DelayedFetch on the partitions, woken by appends and HW moves, which re-reads everything when it completes.
"""

import asyncio
import dataclasses

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.fetch import (
    FetchPartitionResult,
    FetchResponseData,
    FetchTopicResult,
    encode_fetch_response,
    part_length,
)
from replog.protocol.messages import decode_request, millis
from replog.security.acls import Operation, ResourceType
from replog.server.dispatch import RequestContext

from ..access import Access
from ..fetch_params import FetchParams, FetchPartitionParams
from ..metrics import BrokerMetrics
from ..replica_manager import ReplicaManager


def handle(ctx: RequestContext, replicas: ReplicaManager, access: Access):
    request = decode_request(ApiKey.FETCH, ctx.api_version, ctx.frame, ctx.body_offset)
    params = FetchParams(
        replica_id=request.replica_id,
        max_wait_ms=millis(request.max_wait),
        min_bytes=request.min_bytes,
        max_bytes=request.max_bytes,
        partitions=[
            FetchPartitionParams(t.topic, p.partition, p.fetch_offset, getattr(p, "current_leader_epoch", -1),
                                 getattr(p, "last_fetched_epoch", -1), getattr(p, "log_start_offset", -1),
                                 p.partition_max_bytes)
            for t in request.topics for p in t.partitions
        ],
    )
    if params.from_follower and not ctx.session.cluster_action:
        # Only brokers replicate: a client claiming a replica id would read past the HW.
        return _encode(ctx.api_version, params, _all_errors(params, ErrorCode.cluster_authorization_failed))
    readable = access.allowed(ctx, Operation.READ, ResourceType.TOPIC, (p.topic for p in params.partitions))
    if len(readable) < len({p.topic for p in params.partitions}):
        return _fetch_readable(ctx, replicas, params, readable)
    results = replicas.fetch_messages(params)
    if isinstance(results, list):
        return _respond(replicas.metrics, ctx.api_version, params, results)
    return _respond_later(replicas.metrics, results, ctx.api_version, params)


def _fetch_readable(ctx: RequestContext, replicas: ReplicaManager, params: FetchParams, readable: set[str]):
    """Fetch the partitions of topics the consumer may READ; the others answer TOPIC_AUTHORIZATION_FAILED."""
    allowed = dataclasses.replace(params, partitions=[p for p in params.partitions if p.topic in readable])
    if not allowed.partitions:
        return _encode(ctx.api_version, params, _all_errors(params, ErrorCode.topic_authorization_failed))
    results = replicas.fetch_messages(allowed)
    if isinstance(results, list):
        return _respond(replicas.metrics, ctx.api_version, params, _with_refusals(params, readable, results))
    return _respond_readable_later(replicas.metrics, results, ctx.api_version, params, readable)


def _with_refusals(params: FetchParams, readable: set[str], results: list[FetchPartitionResult]):
    fetched = iter(results)
    return [next(fetched) if p.topic in readable else
            FetchPartitionResult(p.partition, ErrorCode.topic_authorization_failed, records=b"")
            for p in params.partitions]


async def _respond_readable_later(metrics: BrokerMetrics, future: asyncio.Future, version: int,
                                  params: FetchParams, readable: set[str]) -> list:
    return _respond(metrics, version, params, _with_refusals(params, readable, await future))


def _all_errors(params: FetchParams, code: ErrorCode) -> list[FetchPartitionResult]:
    return [FetchPartitionResult(p.partition, code, records=b"") for p in params.partitions]


def _encode(version: int, params: FetchParams, results: list[FetchPartitionResult]) -> list:
    topics: list[FetchTopicResult] = []
    for p, result in zip(params.partitions, results, strict=True):
        if not topics or topics[-1].topic != p.topic:
            topics.append(FetchTopicResult(p.topic))
        topics[-1].partitions.append(result)
    return encode_fetch_response(version, FetchResponseData(topics=topics))


def _respond(metrics: BrokerMetrics, version: int, params: FetchParams, results: list[FetchPartitionResult]) -> list:
    """Encode the answer, counting the record bytes it carries (BytesOut / ReplicationBytesOut)."""
    for p, result in zip(params.partitions, results, strict=True):
        nbytes = part_length(result.records)
        if nbytes:
            metrics.record_fetch_out(p.topic, nbytes, to_follower=params.from_follower)
    return _encode(version, params, results)


async def _respond_later(metrics: BrokerMetrics, future: asyncio.Future, version: int, params: FetchParams) -> list:
    return _respond(metrics, version, params, await future)
