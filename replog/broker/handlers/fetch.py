"""Fetch (key 1), v4-12: read whole batches as file slices, to the HW for consumers and the LEO for followers.

One path serves both, as in Kafka: a fetch with a replica id is a follower replicating (a cluster action,
so only an authenticated broker may send one), which reports its LEO to the leader with every request.
KIP-74 limits: the response's max_bytes and each partition's max bytes, except that the first partition
with data returns at least one whole batch. The response is sent at once if max_wait <= 0, min_bytes is
met, any partition has an error or a diverging epoch (facts §5); otherwise a DelayedFetch parks on the
partitions and is woken by appends and HW moves, re-reading everything when it completes.
"""

import asyncio
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from replog.log.errors import OffsetOutOfRangeError
from replog.log.offset_metadata import LogOffsetMetadata
from replog.protocol.apis import ApiKey
from replog.protocol.fetch import (
    FetchPartitionResult,
    FetchResponseData,
    FetchTopicResult,
    encode_fetch_response,
    part_length,
)
from replog.protocol.messages import decode_request, millis

from ..delayed_fetch_rules import ParkedPartition, delayed_fetch_can_complete
from ..purgatory import DelayedOperation
from ..replica_manager import CONSUMER, FollowerFetch

CONSUMER_REPLICA_IDS = (-1, -2)  # -1 consumer, -2 debugging consumer


@dataclass(slots=True)
class FetchPartitionParams:
    topic: str
    partition: int
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int
    max_bytes: int

    def fetcher(self, replica_id: int) -> FollowerFetch:
        return FollowerFetch(replica_id, self.log_start_offset) if replica_id >= 0 else CONSUMER


@dataclass(slots=True)
class FetchParams:
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    partitions: list[FetchPartitionParams]

    @property
    def from_follower(self) -> bool:
        return self.replica_id >= 0


def handle(ctx, broker):
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
    results, fetch_offsets, readable_bytes, respond_now = read_all(broker, params)
    if params.max_wait_ms <= 0 or not params.partitions or readable_bytes >= params.min_bytes or respond_now:
        return _respond(broker, ctx.api_version, params, results)
    op = DelayedFetch(broker, params, fetch_offsets)
    keys = [(p.topic, p.partition) for p in params.partitions]
    broker.replica_manager.fetch_purgatory.try_complete_else_watch(op, keys)
    return _respond_later(broker, op.future, ctx.api_version, params)


def read_all(
    broker, params: FetchParams
) -> tuple[list[FetchPartitionResult], list[LogOffsetMetadata | None], int, bool]:
    """(results, where each partition's read started (None if it did not read), bytes read, whether to
    answer now: an error or a diverging epoch)."""
    results, fetch_offsets, total, respond_now = [], [], 0, False
    for p in params.partitions:
        budget = params.max_bytes - total
        read = broker.replica_manager.read_partition(
            p.topic, p.partition, p.fetch_offset, current_leader_epoch=p.current_leader_epoch,
            last_fetched_epoch=p.last_fetched_epoch, max_bytes=max(0, min(budget, p.max_bytes)),
            fetcher=p.fetcher(params.replica_id), min_one_batch=total == 0)
        file_slice = read.result.slice if read.result is not None else None
        # Kafka sends an empty record set, never null: librdkafka rejects a null one as malformed.
        result = FetchPartitionResult(p.partition, read.error_code, read.high_watermark, read.high_watermark,
                                      read.log_start_offset, records=file_slice if file_slice is not None else b"",
                                      diverging_epoch=read.diverging_epoch)
        total += file_slice.length if file_slice is not None else 0
        respond_now = respond_now or read.error_code != ErrorCode.none or read.diverging_epoch is not None
        results.append(result)
        fetch_offsets.append(read.result.fetch_offset_metadata if read.result is not None else None)
    return results, fetch_offsets, total, respond_now


def _all_errors(params: FetchParams, code: ErrorCode) -> list[FetchPartitionResult]:
    return [FetchPartitionResult(p.partition, code, records=b"") for p in params.partitions]


def _encode(version: int, params: FetchParams, results: list[FetchPartitionResult]) -> list:
    topics: list[FetchTopicResult] = []
    for p, result in zip(params.partitions, results, strict=True):
        if not topics or topics[-1].topic != p.topic:
            topics.append(FetchTopicResult(p.topic))
        topics[-1].partitions.append(result)
    return encode_fetch_response(version, FetchResponseData(topics=topics))


def _respond(broker, version: int, params: FetchParams, results: list[FetchPartitionResult]) -> list:
    """Encode the answer, counting the record bytes it carries (BytesOut / ReplicationBytesOut)."""
    metrics = broker.replica_manager.metrics
    for p, result in zip(params.partitions, results, strict=True):
        nbytes = part_length(result.records)
        if nbytes:
            metrics.record_fetch_out(p.topic, nbytes, to_follower=params.from_follower)
    return _encode(version, params, results)


async def _respond_later(broker, future: asyncio.Future, version: int, params: FetchParams) -> list:
    return _respond(broker, version, params, await future)


class DelayedFetch(DelayedOperation):
    """Completes early on Kafka's conditions (facts §5) without reading data: leadership lost or partition
    gone (A-C), fenced epoch (E), fetch offset past the end or on an older segment (F), min_bytes of data
    available, counted from log positions (G), or a diverging epoch (H). Then it reads afresh."""

    def __init__(self, broker, params: FetchParams, fetch_offsets: list[LogOffsetMetadata | None]) -> None:
        super().__init__(params.max_wait_ms)
        assert len(fetch_offsets) == len(params.partitions)
        assert None not in fetch_offsets, "a partition that did not read answers at once, it never parks"
        self._broker = broker
        self._params = params
        self._fetch_offsets = fetch_offsets
        self.future = asyncio.get_running_loop().create_future()

    def try_complete(self) -> bool:
        # Cached state only (see delayed_fetch_rules): a wake-up from an append cannot fail on the disk.
        parked = [self._parked(p, fetch_offset) for p, fetch_offset in zip(self._params.partitions,
                                                                           self._fetch_offsets, strict=True)]
        return delayed_fetch_can_complete(parked, self._params.min_bytes) and self.force_complete()

    def _parked(self, p: FetchPartitionParams, fetch_offset: LogOffsetMetadata) -> ParkedPartition:
        partition = self._broker.replica_manager.get_partition(p.topic, p.partition)
        if partition is None:  # deleted: the fresh read answers UNKNOWN_TOPIC_OR_PARTITION
            return ParkedPartition(leads=False, epoch_matches=False, diverges=False, fetch_offset=fetch_offset,
                                   end_offset=fetch_offset, max_bytes=p.max_bytes)
        return ParkedPartition(
            leads=partition.is_leader,
            epoch_matches=partition.check_leader_epoch(p.current_leader_epoch) == ErrorCode.none,
            diverges=self._diverges(partition, p),
            fetch_offset=fetch_offset,
            end_offset=partition.end_offset_metadata_for_fetch(self._params.from_follower),
            max_bytes=p.max_bytes,
        )

    @staticmethod
    def _diverges(partition, p: FetchPartitionParams) -> bool:
        try:
            return partition.diverging_epoch(p.fetch_offset, p.last_fetched_epoch) is not None
        except OffsetOutOfRangeError:
            return True

    def on_complete(self) -> None:
        results, _, _, _ = read_all(self._broker, self._params)
        if not self.future.done():
            self.future.set_result(results)
