"""Fetch (key 1), v4-12: read whole batches as file slices, to the HW for consumers and the LEO for followers.

One path serves both, as in Kafka: a fetch with a replica id is a follower replicating (a cluster action,
so only an authenticated broker may send one), which reports its LEO to the leader with every request.
KIP-74 limits: the response's max_bytes and each partition's max bytes, except that the first partition
with data returns at least one whole batch. The response is sent at once if max_wait <= 0, min_bytes is
met, any partition has an error or a diverging epoch (facts §5); otherwise the replica manager parks a
DelayedFetch on the partitions, woken by appends and HW moves, which re-reads everything when it completes.

Fetch sessions (KIP-227, v7+, fetch_sessions.py): a request in a session names only the partitions whose
fetch parameters changed; the broker reads the session's partitions that may have news (not the quiet ones,
where the fetcher was caught up and nothing changed since) and answers the changed ones.
"""

import functools

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
from ..fetch_sessions import (
    INVALID_SESSION_ID,
    FetchContext,
    FetchSession,
    Incremental,
    NewSession,
    SessionError,
)
from ..replica_manager import ReplicaManager

# A quiet session partition is read at least every replica.lag.time.max.ms / this: a follower's reads keep its
# caught-up time fresh, so its first fetch after a long idle stretch still finds it well inside the lag bound.
QUIET_REFRESH_FRACTION = 4


def handle(ctx: RequestContext, replicas: ReplicaManager, access: Access):
    request = decode_request(ApiKey.FETCH, ctx.api_version, ctx.frame, ctx.body_offset)
    requested = [
        FetchPartitionParams(t.topic, p.partition, p.fetch_offset, getattr(p, "current_leader_epoch", -1),
                             getattr(p, "last_fetched_epoch", -1), getattr(p, "log_start_offset", -1),
                             p.partition_max_bytes)
        for t in request.topics for p in t.partitions
    ]
    from_follower = request.replica_id >= 0
    if from_follower and not ctx.may_act_for_cluster:
        # Only brokers replicate: a client claiming a replica id would read past the HW. No session is touched.
        return _encode(ctx.api_version, requested, _all_errors(requested, ErrorCode.cluster_authorization_failed))
    # Before v7 the request has no session fields: the defaults (id 0, epoch -1) make it sessionless.
    forgotten = [(t.topic, int(p)) for t in getattr(request, "forgotten_topics_data", ()) for p in t.partitions]
    context = replicas.fetch_sessions.new_context(
        getattr(request, "session_id", INVALID_SESSION_ID), getattr(request, "session_epoch", -1), requested,
        forgotten, privileged=from_follower, now_ms=replicas.clock_ms())
    if isinstance(context, SessionError):
        return encode_fetch_response(ctx.api_version, FetchResponseData(topics=[], error_code=context.error_code))
    session = context.session if isinstance(context, Incremental) else None
    topics = session.topics if session is not None else {p.topic for p in context.partitions}
    readable = access.allowed(ctx, Operation.READ, ResourceType.TOPIC, topics)
    if session is not None and len(readable) == len(topics):
        # Only what may have news is read; a parked fetch takes in a quiet partition when it changes.
        partitions = session.plan_reads(replicas.clock_ms(),
                                        replicas.replica_lag_time_max_ms // QUIET_REFRESH_FRACTION)
    else:
        session = None
        partitions = context.partitions
    # Built once, with the partitions to read: each dataclasses.replace of it cost more than the constructor.
    min_bytes, max_bytes = request.min_bytes, request.max_bytes
    if not from_follower:
        min_bytes, max_bytes = _within_broker_limit(min_bytes, max_bytes, replicas.fetch_max_bytes)
    params = FetchParams(request.replica_id, millis(request.max_wait), min_bytes, max_bytes, partitions)
    results = _fetch(replicas, params, readable, session)
    if isinstance(results, list):
        return _respond(replicas, ctx.api_version, params, context, results)
    # Encoded in the call that completes the parked fetch (server/completion.py): for a follower, the append
    # that brings it data; for a consumer, the follower fetch that moves the HW.
    return results.then(functools.partial(_respond, replicas, ctx.api_version, params, context))


def _within_broker_limit(min_bytes: int, max_bytes: int, fetch_max_bytes: int) -> tuple[int, int]:
    """A consumer's (min_bytes, max_bytes): its response carries at most the broker's fetch.max.bytes
    (KIP-541), whatever it asks, and waits for no more than that (Kafka's KafkaApis clamps min_bytes alike);
    the first batch still goes out whole (KIP-74). A follower's limit is its own
    replica.fetch.response.max.bytes."""
    max_bytes = min(max_bytes, fetch_max_bytes)
    return min(min_bytes, max_bytes), max_bytes


def _quiet_positions(replicas: ReplicaManager, params: FetchParams, results: list[FetchPartitionResult]) -> list:
    """For each partition read: where a read from the fetcher's offset starts in the log (the end's position,
    for a parked fetch to count new bytes from) if the partition is now quiet, else None. Quiet: the answer
    carried no data, error or divergence, the fetcher is caught up (a follower at the LEO, a consumer at the
    HW), and a follower's reads are not needed to move its ISR membership (it is in the ISR and no ISR change
    is in flight: each fetch may retry an expansion). Every later change to the partition that would make a
    read say more (an append, a HW, log start, leadership or ISR change) is reported to the sessions."""
    positions = []
    for p, result in zip(params.partitions, results, strict=True):
        position = None
        if (result.error_code == ErrorCode.none and not part_length(result.records)
                and result.diverging_epoch is None):
            partition = replicas.get_partition(p.topic, p.partition)
            if (partition is not None and partition.is_leader and not partition.storage_failed
                    and (not params.from_follower or (params.replica_id in partition.state.isr
                                                      and partition.pending_isr is None))):
                end = partition.log.log_end_offset if params.from_follower else partition.high_watermark
                if end == p.fetch_offset:
                    position = partition.end_offset_metadata_for_fetch(params.from_follower)
        positions.append(position)
    return positions


def _fetch(replicas: ReplicaManager, params: FetchParams, readable: set[str], session: FetchSession | None):
    """The results of every partition of `params`, or a future of them; the partitions of topics the fetcher
    may not READ answer TOPIC_AUTHORIZATION_FAILED. A session (its quiet partitions) comes only with readable
    topics."""
    if all(p.topic in readable for p in params.partitions):
        return replicas.fetch_messages(params, session)
    allowed = FetchParams(params.replica_id, params.max_wait_ms, params.min_bytes, params.max_bytes,
                          [p for p in params.partitions if p.topic in readable])
    if not allowed.partitions:
        return _all_errors(params.partitions, ErrorCode.topic_authorization_failed)
    results = replicas.fetch_messages(allowed)
    if isinstance(results, list):
        return _with_refusals(params, readable, results)
    return results.then(functools.partial(_with_refusals, params, readable))


def _with_refusals(params: FetchParams, readable: set[str], results: list[FetchPartitionResult]):
    fetched = iter(results)
    return [next(fetched) if p.topic in readable else
            FetchPartitionResult(p.partition, ErrorCode.topic_authorization_failed, records=b"")
            for p in params.partitions]


def _all_errors(partitions: list[FetchPartitionParams], code: ErrorCode) -> list[FetchPartitionResult]:
    return [FetchPartitionResult(p.partition, code, records=b"") for p in partitions]


def _encode(version: int, partitions: list[FetchPartitionParams], results: list[FetchPartitionResult],
            session_id: int = INVALID_SESSION_ID) -> list:
    # One entry per topic, even where a session's order (partitions with data move to the back) splits one.
    topics: dict[str, FetchTopicResult] = {}
    for p, result in zip(partitions, results, strict=True):
        topics.setdefault(p.topic, FetchTopicResult(p.topic)).partitions.append(result)
    return encode_fetch_response(version, FetchResponseData(topics=list(topics.values()), session_id=session_id))


def _respond(replicas: ReplicaManager, version: int, params: FetchParams, context: FetchContext,
             results: list[FetchPartitionResult]) -> list:
    """Encode the answer, counting the record bytes it carries (BytesOut / ReplicationBytesOut). A new session
    is created now, from what this answer tells the fetcher; an incremental answer carries the changes."""
    session_id, session = INVALID_SESSION_ID, None
    if isinstance(context, NewSession):
        session_id = replicas.fetch_sessions.create(context.privileged, params.partitions, results,
                                                    replicas.clock_ms())
        session = replicas.fetch_sessions.get(session_id)
    elif isinstance(context, Incremental):
        session_id, session = context.session.id, context.session
    if session is not None:
        session.record_reads(params.partitions, _quiet_positions(replicas, params, results), replicas.clock_ms())
    partitions = params.partitions
    if isinstance(context, Incremental):
        selected = context.session.select_changed(partitions, results)
        if len(selected) < len(partitions):  # often all of them: a woken follower's fetch of the new batch
            partitions = [partitions[i] for i in selected]
            results = [results[i] for i in selected]
    for p, result in zip(partitions, results, strict=True):
        nbytes = part_length(result.records)
        if nbytes:
            replicas.metrics.record_fetch_out(p.topic, nbytes, to_follower=params.from_follower)
    return _encode(version, partitions, results, session_id)
