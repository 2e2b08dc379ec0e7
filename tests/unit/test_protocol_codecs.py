import datetime
import uuid

import pytest
from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey, request_header_version, response_header_version
from replog.protocol.fetch import (
    FetchPartitionResult,
    FetchResponseData,
    FetchTopicResult,
    decode_fetch_response,
    encode_fetch_response,
)
from replog.protocol.headers import decode_request_header, encode_request_header, encode_response_header
from replog.protocol.messages import decode_request, decode_response, encode_request, encode_response
from replog.protocol.primitives import DecodeError, Reader, Writer
from replog.protocol.produce import (
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequestData,
    ProduceTopicData,
    decode_produce_request,
    encode_produce_request,
    encode_produce_response,
)


def test_request_header_v1_exact_bytes():
    data = encode_request_header(ApiKey.METADATA, 1, 7, "cli")
    assert data == b"\x00\x03\x00\x01\x00\x00\x00\x07\x00\x03cli"
    header = decode_request_header(bytearray(data))
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, 1, 7, "cli")
    assert header.body_offset == len(data)


def test_request_header_v2_has_tagged_fields_and_legacy_client_id():
    data = encode_request_header(ApiKey.METADATA, 12, 9, None)
    assert data == b"\x00\x03\x00\x0c\x00\x00\x00\x09\xff\xff\x00"
    assert decode_request_header(bytearray(data)).client_id is None


def test_response_header_versions():
    assert encode_response_header(5, 0) == b"\x00\x00\x00\x05"
    assert encode_response_header(5, 1) == b"\x00\x00\x00\x05\x00"
    assert response_header_version(ApiKey.API_VERSIONS, 3) == 0  # always v0 (KIP-511)
    assert response_header_version(ApiKey.METADATA, 9) == 1
    assert request_header_version(ApiKey.FETCH, 11) == 1
    assert request_header_version(ApiKey.FETCH, 12) == 2


@pytest.mark.parametrize("version", [3, 7, 8, 9])
def test_produce_request_round_trip_keeps_records_as_writable_views(version):
    records = bytearray(b"R" * 100)
    request = ProduceRequestData(None, -1, 30000, [ProduceTopicData("t", [ProducePartitionData(2, memoryview(records))])])
    frame = bytearray(b"".join(bytes(p) for p in encode_produce_request(version, request)))
    decoded = decode_produce_request(version, frame, 0)
    assert decoded.acks == -1 and decoded.timeout_ms == 30000
    view = decoded.topics[0].partitions[0].records
    assert bytes(view) == bytes(records)
    view[0] = ord("S")  # stamping in place writes into the frame, no copy
    assert frame[frame.index(b"SRR")] == ord("S")
    # kio, an independent codec, reads the same bytes the same way
    kio_request = decode_request(ApiKey.PRODUCE, version, bytes(frame), 0)
    assert kio_request.topic_data[0].partition_data[0].index == 2


def test_produce_request_trailing_bytes_ignored_as_kafka_does():
    request = ProduceRequestData(None, 1, 1000, [])
    frame = bytearray(b"".join(bytes(p) for p in encode_produce_request(9, request)) + b"\x00\x00\x00")
    decoded = decode_produce_request(9, frame, 0)
    assert (decoded.acks, decoded.timeout_ms, decoded.topics) == (1, 1000, [])


def test_produce_request_truncated_body_rejected():
    request = ProduceRequestData(None, 1, 1000, [])
    frame = bytearray(b"".join(bytes(p) for p in encode_produce_request(9, request)))
    with pytest.raises(DecodeError):
        decode_produce_request(9, frame[:-1], 0)


@pytest.mark.parametrize("version", range(3, 11))
def test_produce_response_is_byte_for_byte_what_kio_writes(version):
    responses = {
        "orders": [ProducePartitionResponse(0, ErrorCode.none, 1_000_000, -1, 42),
                   ProducePartitionResponse(7, ErrorCode.not_enough_replicas, -1, -1, -1, "ISR of 1 below 2")],
        "émoji-free-but-utf8-ü": [ProducePartitionResponse(2, ErrorCode.none, 5, 1_700_000_000_000, 0)],
    }
    kio_body = {"throttle_time": 17, "responses": [
        {"name": name, "partition_responses": [
            {"index": p.index, "error_code": p.error_code, "base_offset": p.base_offset,
             "log_append_time": None if p.log_append_time_ms == -1 else
             datetime.datetime.fromtimestamp(p.log_append_time_ms / 1000, datetime.UTC),
             "log_start_offset": p.log_start_offset, "record_errors": [], "error_message": p.error_message}
            for p in partitions]}
        for name, partitions in responses.items()]}
    expected = encode_response(ApiKey.PRODUCE, version, kio_body)
    assert encode_produce_response(version, responses, throttle_time_ms=17) == expected


def test_produce_response_with_no_partitions_matches_kio():
    assert encode_produce_response(9, {}) == encode_response(ApiKey.PRODUCE, 9, {"responses": [], "throttle_time": 0})


@pytest.mark.parametrize("version", [4, 5, 7, 11, 12])
def test_fetch_response_matches_kio(version):
    partition = FetchPartitionResult(3, 0, 100, 100, 5, b"records!",
                                     diverging_epoch=(4, 90) if version >= 12 else None)
    data = FetchResponseData(topics=[FetchTopicResult("topic", [partition])])
    encoded = b"".join(bytes(p) for p in encode_fetch_response(version, data))
    kio_view = decode_response(ApiKey.FETCH, version, encoded, 0).responses[0].partitions[0]
    assert kio_view.records == b"records!"
    assert kio_view.high_watermark == 100
    if version >= 12:
        assert (kio_view.diverging_epoch.epoch, kio_view.diverging_epoch.end_offset) == (4, 90)
    ours = decode_fetch_response(version, encoded, 0).topics[0].partitions[0]
    assert bytes(ours.records) == b"records!"
    assert ours.diverging_epoch == partition.diverging_epoch


def test_fetch_response_omits_default_tagged_fields():
    data = FetchResponseData(topics=[FetchTopicResult("t", [FetchPartitionResult(0, records=None)])])
    encoded = b"".join(bytes(p) for p in encode_fetch_response(12, data))
    # partition tagged-field section is a single zero count byte, then topic and top-level counts
    assert encoded.endswith(b"\x00\x00\x00\x00")


def test_kio_glue_drops_fields_a_version_lacks():
    body = {"throttle_time": 0, "brokers": [{"node_id": 1, "host": "h", "port": 9, "rack": None}],
            "cluster_id": "c", "controller_id": 1,
            "topics": [{"error_code": ErrorCode.none, "name": "t", "topic_id": uuid.uuid4(), "partitions": [
                {"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 3, "replica_nodes": [1],
                 "isr_nodes": [1], "offline_replicas": []}]}]}
    v1 = decode_response(ApiKey.METADATA, 1, encode_response(ApiKey.METADATA, 1, body), 0)
    v12 = decode_response(ApiKey.METADATA, 12, encode_response(ApiKey.METADATA, 12, body), 0)
    assert v1.topics[0].partitions[0].leader_id == 1
    assert v12.topics[0].partitions[0].leader_epoch == 3


def test_kio_request_decode_ignores_trailing_bytes_and_rejects_truncation():
    data = encode_request(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": True,
                                               "include_topic_authorized_operations": False})
    assert decode_request(ApiKey.METADATA, 12, data, 0).topics is None
    # librdkafka 2.15/2.16 send 3 bytes after a Metadata v12 body; Kafka ignores them.
    assert decode_request(ApiKey.METADATA, 12, data + b"\x00\x00\x00", 0).allow_auto_topic_creation is True
    with pytest.raises(DecodeError):
        decode_request(ApiKey.METADATA, 12, data[:-1], 0)


def test_kio_response_decode_rejects_trailing_bytes():
    data = encode_response(ApiKey.API_VERSIONS, 3, {"error_code": 0, "api_keys": [], "throttle_time": 0})
    assert decode_response(ApiKey.API_VERSIONS, 3, data, 0).error_code == 0
    with pytest.raises(DecodeError, match="trailing"):
        decode_response(ApiKey.API_VERSIONS, 3, data + b"\x00", 0)


def test_reader_bounds_array_lengths_by_remaining_bytes():
    w = Writer()
    w.int32(2**31 - 1)
    with pytest.raises(DecodeError):
        Reader(bytes(w.buf)).array_length(compact=False)
    with pytest.raises(DecodeError):
        Reader(b"\xff\xff\xff\xfe").nullable_bytes(compact=False)  # length -2


def test_reader_rejects_overlong_varint():
    with pytest.raises(DecodeError):
        Reader(b"\x80\x80\x80\x80\x80\x01").uvarint()


@pytest.mark.parametrize("value", [0, 1, 127, 128, 16383, 16384, 2**31 - 1])
def test_uvarint_round_trip(value):
    w = Writer()
    w.uvarint(value)
    assert Reader(bytes(w.buf)).uvarint() == value


def _kio_fetch_partition(p: FetchPartitionResult) -> dict:
    body = {"partition_index": p.partition_index, "error_code": p.error_code, "high_watermark": p.high_watermark,
            "last_stable_offset": p.last_stable_offset, "log_start_offset": p.log_start_offset,
            "aborted_transactions": None if p.aborted_transactions is None else [
                {"producer_id": producer_id, "first_offset": first} for producer_id, first in p.aborted_transactions],
            "preferred_read_replica": p.preferred_read_replica,
            "records": None if p.records is None else bytes(p.records)}
    if p.diverging_epoch is not None:
        body["diverging_epoch"] = {"epoch": p.diverging_epoch[0], "end_offset": p.diverging_epoch[1]}
    if p.current_leader is not None:
        body["current_leader"] = {"leader_id": p.current_leader[0], "leader_epoch": p.current_leader[1]}
    return body


@pytest.mark.parametrize("version", range(4, 13))
def test_fetch_response_of_many_partitions_is_kio_s_encoding_byte_for_byte(version):
    """The packed partition heads (one struct per version) against kio's field-by-field encoding: records,
    none, null, errors, aborted transactions, and the v12 tagged fields, in two topics, session fields v7+."""
    tagged = version >= 12
    partitions = {
        "orders": [FetchPartitionResult(0, 0, 100, 100, 5, b"batch-bytes"),
                   FetchPartitionResult(1, 0, 7, 7, 0, b""),
                   FetchPartitionResult(2, ErrorCode.not_leader_or_follower, -1, -1, -1, None),
                   FetchPartitionResult(3, 0, 2**40, 2**40 - 3, 2**33, b"x" * 200,
                                        aborted_transactions=[(12, 40), (13, 41)],
                                        preferred_read_replica=2 if version >= 11 else -1)],
        "a-topic-named-at-some-length" * 3: [
            FetchPartitionResult(9, 0, 50, 50, 0, b"", diverging_epoch=(4, 45) if tagged else None,
                                 current_leader=(1, 5) if tagged else None),
            FetchPartitionResult(10, ErrorCode.offset_out_of_range, 50, 50, 10, b"",
                                 current_leader=(2, 6) if tagged else None)],
    }
    data = FetchResponseData(topics=[FetchTopicResult(t, list(ps)) for t, ps in partitions.items()],
                             throttle_time_ms=3, session_id=77 if version >= 7 else 0)
    kio_body = {"throttle_time": 3, "error_code": 0, "session_id": data.session_id, "responses": [
        {"topic": t, "partitions": [_kio_fetch_partition(p) for p in ps]} for t, ps in partitions.items()]}
    encoded = b"".join(bytes(p) for p in encode_fetch_response(version, data))
    assert encoded == encode_response(ApiKey.FETCH, version, kio_body)
