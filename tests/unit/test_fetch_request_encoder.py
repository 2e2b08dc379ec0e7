"""The hand-written FetchRequest v12 encoder (replog.protocol.fetch_request) writes kio's bytes exactly, and
what it writes decodes on the broker's side (messages.decode_request) to the fields it was given."""

from __future__ import annotations

import pytest

from replog.protocol import messages
from replog.protocol.apis import ApiKey
from replog.protocol.fetch_request import (
    FETCH_REQUEST_VERSION,
    FetchRequestData,
    FetchRequestPartitionData,
    encode_fetch_request,
)


def _partition(partition: int, offset: int, *, last_fetched_epoch: int = 3) -> FetchRequestPartitionData:
    return FetchRequestPartitionData(partition, 4, offset, last_fetched_epoch, 17, 1_048_576)


FULL_FETCH = FetchRequestData(2, 500, 1, 10_485_760, 0, 0, 0, {"orders": [_partition(0, 123_456_789_012)]})
REQUESTS = {
    "full fetch, one partition": FULL_FETCH,
    "incremental, two topics, forgotten ones": FetchRequestData(
        3, 500, 1, 10_485_760, 0, 77, 9,
        {"orders": [_partition(0, 5), _partition(7, 2**40)], "é-topic": [_partition(1, 0, last_fetched_epoch=-1)]},
        {"gone": [0, 3], "orders": [2]},
    ),  # fmt: skip
    "incremental, nothing changed": FetchRequestData(1, 500, 1, 10_485_760, 0, 2**31 - 1, 2**31 - 1, {}),
    "read committed, a rack, 200 partitions": FetchRequestData(
        9, 0, 0, 1, 1, 5, 1, {"t": [_partition(p, p * 1000) for p in range(200)]}, {}, "rack-a"
    ),
}


def _as_kio_dict(request: FetchRequestData) -> dict:
    return {
        "replica_id": request.replica_id,
        "max_wait": request.max_wait_ms,
        "min_bytes": request.min_bytes,
        "max_bytes": request.max_bytes,
        "isolation_level": request.isolation_level,
        "session_id": request.session_id,
        "session_epoch": request.session_epoch,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": p.partition,
                        "current_leader_epoch": p.current_leader_epoch,
                        "fetch_offset": p.fetch_offset,
                        "last_fetched_epoch": p.last_fetched_epoch,
                        "log_start_offset": p.log_start_offset,
                        "partition_max_bytes": p.partition_max_bytes,
                    }
                    for p in partitions
                ],
            }
            for topic, partitions in request.topics.items()
        ],
        "forgotten_topics_data": [{"topic": t, "partitions": ps} for t, ps in request.forgotten.items()],
        "rack_id": request.rack_id,
    }


@pytest.mark.parametrize("request_data", REQUESTS.values(), ids=REQUESTS.keys())
def test_encoding_equals_kios_byte_for_byte(request_data):
    expected = messages.encode_request(ApiKey.FETCH, FETCH_REQUEST_VERSION, _as_kio_dict(request_data))
    assert encode_fetch_request(request_data) == expected


@pytest.mark.parametrize("request_data", REQUESTS.values(), ids=REQUESTS.keys())
def test_the_brokers_decoder_reads_back_every_field(request_data):
    body = encode_fetch_request(request_data)
    decoded = messages.decode_request(ApiKey.FETCH, FETCH_REQUEST_VERSION, memoryview(body).toreadonly(), 0)
    assert (decoded.replica_id, messages.millis(decoded.max_wait), decoded.min_bytes, decoded.max_bytes) == (
        request_data.replica_id, request_data.max_wait_ms, request_data.min_bytes, request_data.max_bytes,
    )  # fmt: skip
    assert (decoded.isolation_level, decoded.session_id, decoded.session_epoch, decoded.rack_id) == (
        request_data.isolation_level, request_data.session_id, request_data.session_epoch, request_data.rack_id,
    )  # fmt: skip
    topics = {
        t.topic: [
            FetchRequestPartitionData(
                int(p.partition), int(p.current_leader_epoch), int(p.fetch_offset), int(p.last_fetched_epoch),
                int(p.log_start_offset), int(p.partition_max_bytes),
            )  # fmt: skip
            for p in t.partitions
        ]
        for t in decoded.topics
    }
    assert topics == request_data.topics
    assert {t.topic: [int(p) for p in t.partitions] for t in decoded.forgotten_topics_data} == request_data.forgotten
