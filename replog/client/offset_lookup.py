"""ListOffsets for the consumer: positions by timestamp, the earliest or the latest offset (the part of
Kafka's consumer its OffsetFetcher plays)."""

import asyncio
from collections.abc import Callable, Iterable

from kio.schema.errors import ErrorCode

from ..protocol.apis import ApiKey
from .cluster import Cluster
from .consumer_records import OffsetAndTimestamp, TopicPartition
from .errors import KafkaError, is_retriable

EARLIEST = -2  # ListOffsets timestamps with special meaning
LATEST = -1
MAX_LIST_OFFSETS_ATTEMPTS = 10


async def list_offsets(
    cluster: Cluster,
    isolation_level: int,
    group_by_leader: Callable[[Iterable[TopicPartition]], dict[int, list[TopicPartition]]],
    wanted: dict[TopicPartition, int],
) -> dict[TopicPartition, OffsetAndTimestamp]:
    """The offset (and timestamp) for each partition's timestamp in `wanted` (EARLIEST, LATEST, or the first
    record at or after it), asking each leader once a round; retriable errors refresh the metadata and try
    again, up to MAX_LIST_OFFSETS_ATTEMPTS rounds."""
    remaining = dict(wanted)
    found: dict[TopicPartition, OffsetAndTimestamp] = {}
    for _ in range(MAX_LIST_OFFSETS_ATTEMPTS):
        for topic in {t for t, _ in remaining}:
            await cluster.topic(topic)
        by_leader = group_by_leader(remaining)
        results = await asyncio.gather(
            *(
                _list_offsets_from(cluster, isolation_level, n, {tp: remaining[tp] for tp in tps})
                for n, tps in by_leader.items()
            ),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, KafkaError) and result.retriable:
                continue
            if isinstance(result, BaseException):
                raise result
            for tp, (code, ot) in result.items():
                if code == 0:
                    found[tp] = ot
                    remaining.pop(tp, None)
                elif not is_retriable(code):
                    raise KafkaError(code, f"ListOffsets {tp[0]}-{tp[1]}")
        if not remaining:
            return found
        await cluster.refresh({t for t, _ in remaining})
    raise KafkaError(ErrorCode.leader_not_available.value, f"ListOffsets gave up on {sorted(remaining)}")

async def _list_offsets_from(
    cluster: Cluster, isolation_level: int, node: int, wanted: dict[TopicPartition, int]
) -> dict[TopicPartition, tuple[int, OffsetAndTimestamp]]:
    conn = await cluster.connection(node)
    topics: dict[str, list[dict]] = {}
    for (topic, partition), timestamp in wanted.items():
        topics.setdefault(topic, []).append(
            {"partition_index": partition, "current_leader_epoch": -1, "timestamp": timestamp}
        )
    request = {
        "replica_id": -1,
        "isolation_level": isolation_level,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }
    response = await conn.send(ApiKey.LIST_OFFSETS, request)
    out = {}
    for topic in response.topics:
        for p in topic.partitions:
            out[(topic.name, int(p.partition_index))] = (
                int(p.error_code),
                OffsetAndTimestamp(int(p.offset), int(p.timestamp)),
            )
    return out
