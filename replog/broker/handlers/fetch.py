"""Fetch (key 1), v4-12: read whole batches as file slices, to the HW for consumers and the LEO for followers.

One path serves both, as in Kafka: a fetch with a replica id is a follower replicating (a cluster action,
so only an authenticated broker may send one), which reports its LEO to the leader with every request.
KIP-74 limits: the response's max_bytes and each partition's max bytes, except that the first partition
with data returns at least one whole batch. The response is sent at once if max_wait <= 0, min_bytes is
met, any partition has an error or a diverging epoch (facts §5); otherwise the replica manager parks a
DelayedFetch on the partitions, woken by appends and HW moves, which re-reads everything when it completes.

Fetch sessions (KIP-227, v7+, fetch_sessions.py): a request in a session names only the partitions whose
fetch parameters changed; the broker fetches every partition of the session and answers the changed ones.
"""

import dataclasses
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
from ..delayed_fetch import QuietPartitions
from ..fetch_params import FetchParams, FetchPartitionParams
from ..fetch_sessions import INVALID_SESSION_ID, FetchContext, Incremental, NewSession, SessionError
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
    params = FetchParams(replica_id=request.replica_id, max_wait_ms=millis(request.max_wait),
                         min_bytes=request.min_bytes, max_bytes=request.max_bytes, partitions=requested)
    if params.from_follower and not ctx.may_act_for_cluster:
        # Only brokers replicate: a client claiming a replica id would read past the HW. No session is touched.
        return _encode(ctx.api_version, params, _all_errors(params, ErrorCode.cluster_authorization_failed))
    # Before v7 the request has no session fields: the defaults (id 0, epoch -1) make it sessionless.
    forgotten = [(t.topic, int(p)) for t in getattr(request, "forgotten_topics_data", ()) for p in t.partitions]
    context = replicas.fetch_sessions.new_context(
        getattr(request, "session_id", INVALID_SESSION_ID), getattr(request, "session_epoch", -1), requested,
        forgotten, privileged=params.from_follower, now_ms=replicas.clock_ms())
    if isinstance(context, SessionError):
        return encode_fetch_response(ctx.api_version, FetchResponseData(topics=[], error_code=context.error_code))
    topics = {p.topic for p in context.partitions}
    readable = access.allowed(ctx, Operation.READ, ResourceType.TOPIC, topics)
    quiet = None
    if isinstance(context, Incremental) and len(readable) == len(topics):
        # Only what may have news is read; the quiet rest is watched while the fetch waits.
        reads, quiet = context.session.plan_reads(
            functools.partial(_quiet_state, replicas, params.replica_id), replicas.clock_ms(),
            replicas.replica_lag_time_max_ms // QUIET_REFRESH_FRACTION)
        params = dataclasses.replace(params, partitions=reads)
    else:
        params = dataclasses.replace(params, partitions=context.partitions)
    results = _fetch(replicas, params, readable, quiet)
    if isinstance(results, list):
        return _respond(replicas, ctx.api_version, params, context, results)
    # Encoded in the call that completes the parked fetch (server/completion.py): for a follower, the append
    # that brings it data; for a consumer, the follower fetch that moves the HW.
    return results.then(functools.partial(_respond, replicas, ctx.api_version, params, context))


def _quiet_state(replicas: ReplicaManager, replica_id: int, key: tuple[str, int]) -> tuple | None:
    """What a quiet session partition's read depends on, as a value: while it stays equal, a read by a
    fetcher that was caught up says nothing new. None: not led here, or a follower whose reads the leader
    still needs (out of the ISR, or an ISR change in flight: each fetch may retry the ISR expansion)."""
    partition = replicas.get_partition(*key)
    if partition is None or not partition.is_leader or partition.storage_failed:
        return None
    if replica_id >= 0 and (replica_id not in partition.state.isr or partition.pending_isr is not None):
        return None
    log = partition.log
    return (partition, partition.leader_epoch, log.log_end_offset, partition.high_watermark, log.log_start_offset)


def _read_quiet_states(replicas: ReplicaManager, params: FetchParams,
                       results: list[FetchPartitionResult]) -> tuple[list[tuple | None], list]:
    """For each partition read: its quiet state if the fetcher is now caught up (it fetched at the LEO, a
    consumer at the HW) and the answer carried no data, error or divergence, else None; and where a read
    from there starts in the log (the end's position), for a parked fetch to count new bytes from."""
    states, positions = [], []
    for p, result in zip(params.partitions, results, strict=True):
        state = position = None
        if (result.error_code == ErrorCode.none and not part_length(result.records)
                and result.diverging_epoch is None):
            state = _quiet_state(replicas, params.replica_id, (p.topic, p.partition))
            if state is not None and state[2 if params.from_follower else 3] == p.fetch_offset:
                position = state[0].end_offset_metadata_for_fetch(params.from_follower)
            else:
                state = None
        states.append(state)
        positions.append(position)
    return states, positions


def _fetch(replicas: ReplicaManager, params: FetchParams, readable: set[str], quiet: QuietPartitions | None):
    """The results of every partition of `params`, or a future of them; the partitions of topics the fetcher
    may not READ answer TOPIC_AUTHORIZATION_FAILED. Quiet partitions come only with readable topics."""
    if all(p.topic in readable for p in params.partitions):
        return replicas.fetch_messages(params, quiet)
    allowed = dataclasses.replace(params, partitions=[p for p in params.partitions if p.topic in readable])
    if not allowed.partitions:
        return _all_errors(params, ErrorCode.topic_authorization_failed)
    results = replicas.fetch_messages(allowed)
    if isinstance(results, list):
        return _with_refusals(params, readable, results)
    return results.then(functools.partial(_with_refusals, params, readable))


def _with_refusals(params: FetchParams, readable: set[str], results: list[FetchPartitionResult]):
    fetched = iter(results)
    return [next(fetched) if p.topic in readable else
            FetchPartitionResult(p.partition, ErrorCode.topic_authorization_failed, records=b"")
            for p in params.partitions]


def _all_errors(params: FetchParams, code: ErrorCode) -> list[FetchPartitionResult]:
    return [FetchPartitionResult(p.partition, code, records=b"") for p in params.partitions]


def _encode(version: int, params: FetchParams, results: list[FetchPartitionResult],
            session_id: int = INVALID_SESSION_ID) -> list:
    # One entry per topic, even where a session's order (partitions with data move to the back) splits one.
    topics: dict[str, FetchTopicResult] = {}
    for p, result in zip(params.partitions, results, strict=True):
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
        session.record_reads(params.partitions, *_read_quiet_states(replicas, params, results), replicas.clock_ms())
    if isinstance(context, Incremental):
        selected = context.session.select_changed(params.partitions, results)
        params = dataclasses.replace(params, partitions=[params.partitions[i] for i in selected])
        results = [results[i] for i in selected]
    for p, result in zip(params.partitions, results, strict=True):
        nbytes = part_length(result.records)
        if nbytes:
            replicas.metrics.record_fetch_out(p.topic, nbytes, to_follower=params.from_follower)
    return _encode(version, params, results, session_id)
