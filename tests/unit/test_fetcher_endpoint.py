"""RemoteLeaderEndpoint over a scripted connection: request fields, zero-copy records, reconnects."""

from __future__ import annotations

import asyncio
import datetime

import pytest
from kio.schema.errors import ErrorCode

from replog.client.connection import Connection
from replog.client.errors import NETWORK_EXCEPTION, KafkaError
from replog.fetcher.leader_endpoint import (
    EARLIEST_TIMESTAMP,
    LIST_OFFSETS_VERSION,
    EpochEndOffset,
    FetchRequestPartition,
    LeaderEndpointError,
    ListedOffset,
    RemoteLeaderEndpoint,
)
from replog.fetcher.manager import FetcherConfig
from replog.log.partition_log import TopicPartition
from replog.protocol import messages
from replog.protocol.apis import ApiKey
from replog.protocol.fetch import (
    FetchPartitionResult,
    FetchResponseData,
    FetchTopicResult,
    encode_fetch_response,
)
from replog.protocol.headers import encode_response_header
from replog.protocol.records import build_batch

CONFIG = FetcherConfig(replica_id=3, max_wait_ms=250, min_bytes=1, max_bytes=5_000, partition_max_bytes=700)
TP = TopicPartition("orders", 2)
BATCH = build_batch([(None, b"value", [], 1_000)], base_offset=40, partition_leader_epoch=6)


class ScriptedConnection:
    """Stands in for client.connection.Connection: checks what is sent, answers with real encodings."""

    def __init__(self, fail_with: Exception | None = None) -> None:
        self.fail_with = fail_with
        self.closed = False
        self.requests: list[tuple[int, int, object]] = []
        self.frames: list[bytearray] = []

    async def request(self, api_key, version, parts, *, timeout_ms=None, flush=False):
        if self.fail_with is not None:
            raise self.fail_with
        self.requests.append(
            (api_key, version, messages.decode_request(api_key, version, b"".join(parts), 0))
        )
        response = FetchResponseData(
            topics=[
                FetchTopicResult(
                    TP.topic,
                    [FetchPartitionResult(TP.partition, 0, 45, 45, 3, BATCH, current_leader=(1, 6))],
                ),
                FetchTopicResult(
                    "other", [FetchPartitionResult(0, ErrorCode.offset_out_of_range, diverging_epoch=None)]
                ),
            ]
        )
        frame = bytearray(encode_response_header(17, 1) + b"".join(encode_fetch_response(version, response)))
        self.frames.append(frame)
        return frame

    async def send(self, api_key, data, *, version=None, timeout_ms=None):
        if self.fail_with is not None:
            raise self.fail_with
        request = messages.decode_request(
            api_key, version, messages.encode_request(api_key, version, data), 0
        )
        self.requests.append((api_key, version, request))
        if api_key == ApiKey.OFFSET_FOR_LEADER_EPOCH:
            body = {
                "throttle_time": 0,
                "topics": [
                    {
                        "topic": TP.topic,
                        "partitions": [
                            {
                                "error_code": ErrorCode.none,
                                "partition": TP.partition,
                                "leader_epoch": 4,
                                "end_offset": 31,
                            }
                        ],
                    }
                ],
            }
        else:
            body = {
                "throttle_time": 0,
                "topics": [
                    {
                        "name": TP.topic,
                        "partitions": [
                            {
                                "partition_index": TP.partition,
                                "error_code": ErrorCode.none,
                                "timestamp": -1,
                                "offset": 12,
                                "leader_epoch": 6,
                            }
                        ],
                    }
                ],
            }
        return messages.build(messages.response_type(api_key, version), body)

    def close(self) -> None:
        self.closed = True


class Connector:
    def __init__(self, *connections: ScriptedConnection | Exception) -> None:
        self.pending = list(connections)
        self.opened: list[ScriptedConnection] = []

    async def __call__(self) -> ScriptedConnection:
        next_one = self.pending.pop(0)
        if isinstance(next_one, Exception):
            raise next_one
        self.opened.append(next_one)
        return next_one


async def test_fetch_sends_a_follower_fetch_v12_and_keeps_records_in_the_frame():
    connection = ScriptedConnection()
    endpoint = RemoteLeaderEndpoint(Connector(connection), 3, CONFIG)
    results = await endpoint.fetch(
        {
            TP: FetchRequestPartition(40, 6, 5, 3, 700),
            TopicPartition("other", 0): FetchRequestPartition(0, 1, None, 0, 700),
        }
    )
    api_key, version, request = connection.requests[0]
    assert (api_key, version) == (ApiKey.FETCH, 12)
    assert (request.replica_id, request.max_wait, request.min_bytes, request.max_bytes) == (
        3,
        datetime.timedelta(milliseconds=250),
        1,
        5_000,
    )
    # The first fetch is a full one that asks for a fetch session (KIP-227: id 0, epoch 0).
    assert (request.isolation_level, request.session_id, request.session_epoch) == (0, 0, 0)
    sent = {(t.topic, p.partition): p for t in request.topics for p in t.partitions}
    orders = sent[(TP.topic, TP.partition)]
    assert (orders.current_leader_epoch, orders.fetch_offset, orders.last_fetched_epoch) == (6, 40, 5)
    assert (orders.log_start_offset, orders.partition_max_bytes) == (3, 700)
    assert sent[("other", 0)].last_fetched_epoch == -1

    result = results[TP]
    assert (result.error_code, result.high_watermark, result.log_start_offset) == (0, 45, 3)
    assert bytes(result.records) == BATCH
    assert result.records.obj is connection.frames[0]  # a view of the response frame, not a copy
    assert results[TopicPartition("other", 0)].error_code == ErrorCode.offset_out_of_range


async def test_a_steady_followers_fetches_are_encoded_once_and_patched_with_each_offset():
    """Fetch after fetch of the same partition (the leader grants no session here: full fetches): the body is
    encoded for the first and patched for the others, and each carries its own offset and epoch."""
    connection = ScriptedConnection()
    endpoint = RemoteLeaderEndpoint(Connector(connection), 3, CONFIG)
    for offset in (40, 43, 2**40, 2**40 + 7):
        await endpoint.fetch({TP: FetchRequestPartition(offset, 6, offset % 5, 3, 700)})
    sent = [(t.partitions[0].fetch_offset, t.partitions[0].last_fetched_epoch)
            for _, _, request in connection.requests for t in request.topics]  # fmt: skip
    assert sent == [(40, 0), (43, 3), (2**40, 2**40 % 5), (2**40 + 7, (2**40 + 7) % 5)]
    assert endpoint._encoded.encodings == 1


async def test_offsets_for_leader_epoch_and_list_offsets_carry_our_replica_id():
    connection = ScriptedConnection()
    endpoint = RemoteLeaderEndpoint(Connector(connection), 3, CONFIG)

    assert await endpoint.offsets_for_leader_epoch({TP: (6, 4)}) == {TP: EpochEndOffset(0, 4, 31)}
    assert await endpoint.list_offset(TP, 6, EARLIEST_TIMESTAMP) == ListedOffset(0, 12)

    (epoch_key, epoch_version, epoch_request), (list_key, list_version, list_request) = connection.requests
    assert (epoch_key, epoch_version, epoch_request.replica_id) == (ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, 3)
    asked = epoch_request.topics[0].partitions[0]
    assert (asked.partition, asked.current_leader_epoch, asked.leader_epoch) == (TP.partition, 6, 4)
    assert (list_key, list_version, list_request.replica_id) == (ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, 3)
    listed = list_request.topics[0].partitions[0]
    assert (listed.partition_index, listed.current_leader_epoch, listed.timestamp) == (TP.partition, 6, -2)


async def test_a_failed_request_drops_the_connection_and_the_next_call_reconnects():
    broken = ScriptedConnection(fail_with=KafkaError(NETWORK_EXCEPTION, "connection reset"))
    healthy = ScriptedConnection()
    connector = Connector(KafkaError(NETWORK_EXCEPTION, "refused"), broken, healthy)
    endpoint = RemoteLeaderEndpoint(connector, 3, CONFIG)
    request = {TP: FetchRequestPartition(40, 6, 5, 3, 700)}

    with pytest.raises(LeaderEndpointError):
        await endpoint.fetch(request)  # cannot connect
    with pytest.raises(LeaderEndpointError):
        await endpoint.fetch(request)  # connected, then the request fails
    assert broken.closed
    assert (await endpoint.fetch(request))[TP].high_watermark == 45
    assert connector.opened == [broken, healthy]

    await endpoint.close()
    assert healthy.closed


async def test_a_garbled_answer_is_an_endpoint_error():
    class Garbling(ScriptedConnection):
        async def request(self, api_key, version, parts, *, timeout_ms=None, flush=False):
            frame = await super().request(api_key, version, parts, timeout_ms=timeout_ms)
            return frame[:-3]

    connection = Garbling()
    endpoint = RemoteLeaderEndpoint(Connector(connection), 3, CONFIG)
    with pytest.raises(LeaderEndpointError):
        await endpoint.fetch({TP: FetchRequestPartition(40, 6, 5, 3, 700)})
    assert connection.closed


async def test_a_follower_fetch_is_on_the_socket_before_the_loop_turns():
    """The fetch is the follower's whole round and the leader's acks=all produces wait for it: the connection
    writes it in the call that makes it, not at the end of the loop turn."""
    writes = []

    class Transport:
        def writelines(self, parts) -> None:
            writes.append(b"".join(bytes(p) for p in parts))

    connection = Connection("127.0.0.1", 9092)
    connection.connection_made(Transport())
    endpoint = RemoteLeaderEndpoint(Connector(connection), 3, CONFIG)
    fetching = asyncio.ensure_future(endpoint.fetch({TP: FetchRequestPartition(40, 6, 5, 3, 700)}))
    await asyncio.sleep(0)  # the fetch runs up to its wait for the answer
    assert len(writes) == 1, "the fetch waited for a loop turn before it was written"
    fetching.cancel()
    with pytest.raises(asyncio.CancelledError):
        await fetching
