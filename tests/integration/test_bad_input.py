"""Bad input against a live broker: each case gets its Kafka error code or a closed connection, and the
broker keeps serving afterwards."""

import struct

import pytest
from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.produce import (
    ProducePartitionData,
    ProduceRequestData,
    ProduceTopicData,
    encode_produce_request,
)
from replog.protocol.records import build_batch
from tests.raw_wire import RawConnection

METADATA_V12_ALL = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


def assert_broker_alive(port: int) -> None:
    conn = RawConnection(port)
    try:
        response = conn.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert response.error_code == ErrorCode.none
    finally:
        conn.close()


def create_topic(conn: RawConnection, name: str, partitions: int = 1) -> None:
    response = conn.call(ApiKey.CREATE_TOPICS, 7, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                    "configs": []}], "timeout": 5000, "validate_only": False})
    assert response.topics[0].error_code == ErrorCode.none


def produce(conn: RawConnection, topic: str, partition: int, records: bytes | bytearray, acks: int = -1,
            version: int = 9):
    request = ProduceRequestData(None, acks, 5000, [ProduceTopicData(topic, [ProducePartitionData(
        partition, memoryview(records))])])
    body = b"".join(bytes(p) for p in encode_produce_request(version, request))
    response = conn.call(ApiKey.PRODUCE, version, body)
    return response.responses[0].partition_responses[0]


@pytest.mark.parametrize("size_bytes", [struct.pack(">i", -1), struct.pack(">i", 2**31 - 1)])
def test_negative_and_oversized_frame_sizes_close_the_connection(broker, size_bytes):
    conn = RawConnection(broker.port)
    conn.sock.sendall(size_bytes + b"\x00" * 16)
    assert conn.is_closed_by_peer()
    assert_broker_alive(broker.port)


@pytest.mark.parametrize("payload", [
    b"\x00",  # shorter than a request header
    struct.pack(">hhi", 9999, 0, 1),  # unknown API key
    struct.pack(">hhi", ApiKey.METADATA, 99, 1) + b"\x00\x00",  # unsupported version
    struct.pack(">hhi", ApiKey.METADATA, 12, 1) + b"\x00\x01x\x00" + b"\xff\xff\xff",  # garbage body
    struct.pack(">hhi", ApiKey.PRODUCE, 7, 1) + b"\xff\xff" + struct.pack(">hii", -1, 1000, -5),  # negative count
])
def test_malformed_or_unknown_requests_close_the_connection(broker, payload):
    conn = RawConnection(broker.port)
    conn.send_frame(payload)
    assert conn.is_closed_by_peer()
    assert_broker_alive(broker.port)


def test_api_versions_too_new_gets_v0_unsupported_version_reply(broker):
    """KIP-511: the reply is v0-encoded with header v0 and lists our versions, ApiVersions included."""
    conn = RawConnection(broker.port)
    correlation_id = conn.send_request(ApiKey.API_VERSIONS, 99, b"")
    frame = conn.receive_frame()
    assert struct.unpack_from(">ih", frame, 0) == (correlation_id, ErrorCode.unsupported_version.value)
    (count,) = struct.unpack_from(">i", frame, 6)
    keys = {struct.unpack_from(">hhh", frame, 10 + 6 * i) for i in range(count)}
    assert (ApiKey.API_VERSIONS, 0, 3) in keys
    assert len(frame) == 10 + 6 * count
    conn.close()


def test_bad_crc_and_wrong_magic_are_corrupt_message(broker):
    conn = RawConnection(broker.port)
    create_topic(conn, "bad-input")
    batch = bytearray(build_batch([(None, b"value", [], 1000)]))
    flipped = bytearray(batch)
    flipped[-1] ^= 0xFF
    assert produce(conn, "bad-input", 0, flipped).error_code == ErrorCode.corrupt_message
    wrong_magic = bytearray(batch)
    wrong_magic[16] = 1
    assert produce(conn, "bad-input", 0, wrong_magic).error_code == ErrorCode.corrupt_message
    truncated = bytearray(batch[:-5])
    assert produce(conn, "bad-input", 0, truncated).error_code == ErrorCode.corrupt_message
    good = produce(conn, "bad-input", 0, batch)
    assert (good.error_code, good.base_offset) == (ErrorCode.none, 0)  # nothing bad was appended
    conn.close()


def test_unknown_topic_partition_and_bad_acks(broker):
    conn = RawConnection(broker.port)
    create_topic(conn, "known")
    batch = bytearray(build_batch([(None, b"v", [], 1000)]))
    assert produce(conn, "missing", 0, batch).error_code == ErrorCode.unknown_topic_or_partition
    assert produce(conn, "known", 7, batch).error_code == ErrorCode.unknown_topic_or_partition
    assert produce(conn, "known", 0, batch, acks=2).error_code == ErrorCode.invalid_required_acks
    fetch = conn.call(ApiKey.FETCH, 12, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "topics": [{"topic": "missing", "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
            "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [],
        "rack_id": ""})
    assert fetch.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
    metadata = conn.call(ApiKey.METADATA, 12, {**METADATA_V12_ALL, "topics": [{"topic_id": None, "name": "no/pe"}]})
    assert metadata.topics[0].error_code == ErrorCode.invalid_topic_exception
    conn.close()


def test_fetch_as_a_replica_is_refused_to_non_brokers(broker):
    conn = RawConnection(broker.port)
    create_topic(conn, "replicated")
    fetch = conn.call(ApiKey.FETCH, 12, {
        "replica_id": 5, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "topics": [{"topic": "replicated", "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
            "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [],
        "rack_id": ""})
    assert fetch.responses[0].partitions[0].error_code == ErrorCode.cluster_authorization_failed
    conn.close()
