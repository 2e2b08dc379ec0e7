"""How a follower talks to a partition leader (Kafka's LeaderEndPoint / RemoteLeaderEndPoint).

The fetcher sees three calls, Fetch, OffsetForLeaderEpoch and ListOffsets, each sent with our broker id as
replica id. A request that does not complete (connection lost, timeout, garbled answer) raises
LeaderEndpointError; the fetcher then backs off every partition and the next call reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import NamedTuple, Protocol

from kio.schema.errors import ErrorCode

from replog.client.connection import Connection
from replog.client.errors import KafkaError
from replog.fetcher.config import FetcherConfig
from replog.fetcher.fetch_answer import decode_fetch_answer
from replog.fetcher.fetch_request_cache import EncodedFetchRequest, FetchRequestPartition
from replog.fetcher.fetch_session import FetchSessionHandler
from replog.log.partition_log import TopicPartition
from replog.protocol.apis import SUPPORTED_APIS, ApiKey, response_header_version
from replog.protocol.fetch import FetchPartitionResult
from replog.protocol.fetch_request import FETCH_REQUEST_VERSION
from replog.protocol.headers import decode_response_header
from replog.protocol.primitives import DecodeError

# The last version naming topics; v12 carries LastFetchedEpoch and DivergingEpoch (KIP-595).
FETCH_VERSION = FETCH_REQUEST_VERSION
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
LIST_OFFSETS_VERSION = SUPPORTED_APIS[ApiKey.LIST_OFFSETS].max_version
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
_READ_UNCOMMITTED = 0


_SESSION_ERRORS = (ErrorCode.fetch_session_id_not_found, ErrorCode.invalid_fetch_session_epoch)


class LeaderEndpointError(Exception):
    """A request to the leader did not complete; nothing is known about any partition in it."""


class FetchRequests(dict[TopicPartition, FetchRequestPartition]):
    """A round's partitions to fetch, and `moved`: those whose entry was added, replaced or removed since the
    previous round's (FetchPlan.take_request), so a fetch session's next request compares only them. The
    fetch plan's own dict: read it before the round's first await, as the request is encoded."""

    __slots__ = ("moved",)

    def __init__(self, partitions: dict[TopicPartition, FetchRequestPartition], moved: set[TopicPartition]) -> None:
        super().__init__(partitions)
        self.moved = moved


class EpochEndOffset(NamedTuple):
    error_code: int
    leader_epoch: int
    end_offset: int


class ListedOffset(NamedTuple):
    error_code: int
    offset: int


class LeaderEndpoint(Protocol):
    async def fetch(
        self, partitions: dict[TopicPartition, FetchRequestPartition]
    ) -> dict[TopicPartition, FetchPartitionResult]:
        """The answers of the partitions with news. In a fetch session (KIP-227) a partition whose data, HW,
        log start and error are as last answered is left out: its fetch state stays as it is."""
        ...

    async def offsets_for_leader_epoch(
        self, partitions: dict[TopicPartition, tuple[int, int]]
    ) -> dict[TopicPartition, EpochEndOffset]:
        """`partitions` maps each partition to (current leader epoch, epoch asked about)."""
        ...

    async def list_offset(
        self, tp: TopicPartition, current_leader_epoch: int, timestamp: int
    ) -> ListedOffset:
        """ListOffsets for one partition; timestamp LATEST_TIMESTAMP (the LEO, for a replica) or EARLIEST."""
        ...

    async def close(self) -> None: ...


class RemoteLeaderEndpoint:
    """LeaderEndpoint over one inter-broker connection, opened lazily and replaced after a failure."""

    def __init__(
        self, connect: Callable[[], Awaitable[Connection]], replica_id: int, config: FetcherConfig
    ) -> None:
        assert replica_id == config.replica_id
        self._connect = connect
        self._replica_id = replica_id
        self._config = config
        self._connection: Connection | None = None
        # One fetch session (KIP-227) per leader connection; sessions outlive connections on the leader.
        self._session: FetchSessionHandler[FetchRequestPartition] = FetchSessionHandler()
        # Round after round the same layout: patched in place rather than encoded again.
        self._encoded = EncodedFetchRequest(replica_id, config.max_wait_ms, config.min_bytes, config.max_bytes,
                                            _READ_UNCOMMITTED)  # fmt: skip

    async def fetch(
        self, partitions: dict[TopicPartition, FetchRequestPartition]
    ) -> dict[TopicPartition, FetchPartitionResult]:
        assert partitions
        request = self._session.build(partitions, partitions.moved if isinstance(partitions, FetchRequests) else None)
        body = self._encoded.body(request)
        try:
            async with self._failures_as_endpoint_errors():
                connection = await self._open()
                # Written in this call: the fetch is the follower's whole round, nothing to coalesce it with,
                # and the leader's acks=all produces wait for it.
                frame = await connection.request(
                    ApiKey.FETCH, FETCH_VERSION, [body], timeout_ms=self._config.request_timeout_ms, flush=True
                )
                assert frame is not None
                _, start = decode_response_header(frame, response_header_version(ApiKey.FETCH, FETCH_VERSION))
                # Records stay memoryviews into `frame`: the follower appends them without a copy.
                answer = decode_fetch_answer(frame, start)
        except (LeaderEndpointError, asyncio.CancelledError):
            # Failed or abandoned (the fetcher cancels a round when a partition starts): whether the leader
            # applied the request to our session is unknown, so the next fetch is a full one.
            self._session.on_failure()
            raise
        if not self._session.on_response(request, answer.error_code, answer.session_id):
            if answer.error_code in _SESSION_ERRORS:
                # Kafka's fetcher answers nothing and sends a full fetch next, without backing off.
                return {}
            raise LeaderEndpointError(f"fetch failed as a whole with error {answer.error_code}")
        return answer.partitions

    async def offsets_for_leader_epoch(
        self, partitions: dict[TopicPartition, tuple[int, int]]
    ) -> dict[TopicPartition, EpochEndOffset]:
        assert partitions
        topics: dict[str, list[dict]] = {}
        for tp, (current_leader_epoch, leader_epoch) in partitions.items():
            topics.setdefault(tp.topic, []).append(
                {
                    "partition": tp.partition,
                    "current_leader_epoch": current_leader_epoch,
                    "leader_epoch": leader_epoch,
                }
            )
        request = {
            "replica_id": self._replica_id,  # v3+: marks the request as a follower's
            "topics": [{"topic": topic, "partitions": ps} for topic, ps in topics.items()],
        }
        async with self._failures_as_endpoint_errors():
            connection = await self._open()
            response = await connection.send(
                ApiKey.OFFSET_FOR_LEADER_EPOCH,
                request,
                version=OFFSET_FOR_LEADER_EPOCH_VERSION,
                timeout_ms=self._config.request_timeout_ms,
            )
        return {
            TopicPartition(topic.topic, int(p.partition)): EpochEndOffset(
                int(p.error_code), int(p.leader_epoch), int(p.end_offset)
            )
            for topic in response.topics
            for p in topic.partitions
        }

    async def list_offset(
        self, tp: TopicPartition, current_leader_epoch: int, timestamp: int
    ) -> ListedOffset:
        """Kafka's fetchLatestOffset / fetchEarliestOffset: ListOffsets with our id as replica id, so the leader
        answers its LEO rather than its HW for LATEST."""
        assert timestamp in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP)
        request = {
            "replica_id": self._replica_id,
            "isolation_level": _READ_UNCOMMITTED,
            "topics": [
                {
                    "name": tp.topic,
                    "partitions": [
                        {
                            "partition_index": tp.partition,
                            "current_leader_epoch": current_leader_epoch,
                            "timestamp": timestamp,
                        }
                    ],
                }
            ],
        }
        async with self._failures_as_endpoint_errors():
            connection = await self._open()
            response = await connection.send(
                ApiKey.LIST_OFFSETS,
                request,
                version=LIST_OFFSETS_VERSION,
                timeout_ms=self._config.request_timeout_ms,
            )
        for topic in response.topics:
            for p in topic.partitions:
                if topic.name == tp.topic and int(p.partition_index) == tp.partition:
                    return ListedOffset(int(p.error_code), int(p.offset))
        raise LeaderEndpointError(f"ListOffsets answer lacks {tp}")

    async def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    async def _open(self) -> Connection:
        if self._connection is None or self._connection.closed:
            self._connection = None
            self._connection = await self._connect()
        return self._connection

    @contextlib.asynccontextmanager
    async def _failures_as_endpoint_errors(self) -> AsyncIterator[None]:
        """A transport or decoding failure becomes LeaderEndpointError and drops the connection, so the next
        request opens a fresh one: a stream that timed out or garbled an answer cannot be trusted again."""
        try:
            yield
        except (KafkaError, OSError, DecodeError) as exc:  # TimeoutError is an OSError
            await self.close()
            raise LeaderEndpointError(f"request to the leader failed: {exc!r}") from exc
