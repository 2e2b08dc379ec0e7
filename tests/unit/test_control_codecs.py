"""Codecs of the controller-to-broker APIs (control.py) and the kio-backed SASL and AlterPartition APIs.

The byte-exact tests spell the wire format out field by field from Kafka's 3.x message JSON, so a codec
that merely agrees with itself but not with Kafka fails them.
"""

import tracemalloc
import uuid

import pytest

from replog.protocol import control
from replog.protocol.apis import SUPPORTED_APIS, ApiKey, request_header_version, response_header_version
from replog.protocol.control import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicError,
    LeaderAndIsrTopicState,
    LiveLeader,
    StopReplicaPartitionError,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    StopReplicaTopicState,
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
    UpdateMetadataTopicState,
)
from replog.protocol.messages import decode_request, decode_response, encode_request, encode_response
from replog.protocol.primitives import DecodeError

TOPIC_ID_1 = uuid.UUID(int=1)
TOPIC_ID_2 = uuid.UUID("6f0c3a4e-2b1d-4c5e-9f8a-7b6c5d4e3f2a")
UUID_1_HEX = "00000000000000000000000000000001"


def h(spaced_hex: str) -> bytes:
    return bytes.fromhex("".join(spaced_hex.split()))


def rich_leader_and_isr() -> LeaderAndIsrRequest:
    return LeaderAndIsrRequest(
        controller_id=1, controller_epoch=5, broker_epoch=77, type=2, is_kraft_controller=True,
        topic_states=[
            LeaderAndIsrTopicState("alpha", TOPIC_ID_1, [
                LeaderAndIsrPartitionState("alpha", 0, 5, 1, 3, [1, 2], 9, [1, 2, 3], [3], [4], True, 1),
                LeaderAndIsrPartitionState("alpha", 7, 4, -1, 0, [], 0, [2]),
            ]),
            LeaderAndIsrTopicState("béta", TOPIC_ID_2, []),
            LeaderAndIsrTopicState("gamma", uuid.uuid4(), [
                LeaderAndIsrPartitionState("gamma", 2**31 - 1, 1, 2, 2**31 - 1, [2], -1, [2, 1], is_new=False),
            ]),
        ],
        live_leaders=[LiveLeader(1, "h1", 9092), LiveLeader(2, "broker-2.local", 19093)],
    )


def rich_update_metadata() -> UpdateMetadataRequest:
    return UpdateMetadataRequest(
        controller_id=3, controller_epoch=8, broker_epoch=2**40, type=1,
        topic_states=[
            UpdateMetadataTopicState("t", TOPIC_ID_1, [
                UpdateMetadataPartitionState("t", 0, 8, 1, 4, [1], 6, [1, 2], [2]),
                UpdateMetadataPartitionState("t", 1, 8, -1, 5, [], 7, [2]),
            ]),
            UpdateMetadataTopicState("empty", TOPIC_ID_2, []),
        ],
        live_brokers=[
            UpdateMetadataBroker(1, [UpdateMetadataEndpoint(9092, "a", "PLAINTEXT"),
                                     UpdateMetadataEndpoint(9093, "a", "SSL", 1)], "rack-1"),
            UpdateMetadataBroker(2, [], None),
        ],
    )


def rich_stop_replica() -> StopReplicaRequest:
    return StopReplicaRequest(
        controller_id=1, controller_epoch=2, broker_epoch=3, is_kraft_controller=True,
        topic_states=[
            StopReplicaTopicState("x", [StopReplicaPartitionState(0, -1, True),
                                        StopReplicaPartitionState(1, 5, False)]),
            StopReplicaTopicState("y", []),
        ],
    )


ROUND_TRIPS = [
    (control.encode_leader_and_isr_request, control.decode_leader_and_isr_request, rich_leader_and_isr()),
    (control.encode_leader_and_isr_request, control.decode_leader_and_isr_request,
     LeaderAndIsrRequest(0, 0, -1, [], [])),
    (control.encode_leader_and_isr_response, control.decode_leader_and_isr_response,
     LeaderAndIsrResponse(0, [LeaderAndIsrTopicError(TOPIC_ID_1, [LeaderAndIsrPartitionError(0, 0),
                                                                  LeaderAndIsrPartitionError(7, 6)]),
                              LeaderAndIsrTopicError(TOPIC_ID_2, [])])),
    (control.encode_leader_and_isr_response, control.decode_leader_and_isr_response,
     LeaderAndIsrResponse(11, [])),
    (control.encode_update_metadata_request, control.decode_update_metadata_request, rich_update_metadata()),
    (control.encode_update_metadata_request, control.decode_update_metadata_request,
     UpdateMetadataRequest(0, 0, -1, [], [], type=2, is_kraft_controller=True)),
    (control.encode_update_metadata_response, control.decode_update_metadata_response,
     UpdateMetadataResponse(41)),
    (control.encode_stop_replica_request, control.decode_stop_replica_request, rich_stop_replica()),
    (control.encode_stop_replica_request, control.decode_stop_replica_request, StopReplicaRequest(0, 0, -1, [])),
    (control.encode_stop_replica_response, control.decode_stop_replica_response,
     StopReplicaResponse(0, [StopReplicaPartitionError("x", 0, 0), StopReplicaPartitionError("x", 1, 3)])),
    (control.encode_stop_replica_response, control.decode_stop_replica_response, StopReplicaResponse(58, [])),
]
ROUND_TRIP_IDS = [f"{enc.__name__}-{i}" for i, (enc, _, _) in enumerate(ROUND_TRIPS)]


@pytest.mark.parametrize(("encode", "decode", "message"), ROUND_TRIPS, ids=ROUND_TRIP_IDS)
def test_round_trip(encode, decode, message):
    data = encode(message)
    assert isinstance(data, bytes)
    assert decode(data, 0) == message
    # The body starts after the request header in a real frame; any buffer type works.
    header = b"\xaa" * 13
    assert decode(bytearray(header + data), len(header)) == message
    assert decode(memoryview(header + data), len(header)) == message


@pytest.mark.parametrize(("encode", "decode", "message"), ROUND_TRIPS, ids=ROUND_TRIP_IDS)
def test_every_truncation_is_rejected(encode, decode, message):
    data = encode(message)
    for end in range(len(data)):
        with pytest.raises(DecodeError):
            decode(data[:end], 0)


@pytest.mark.parametrize(("encode", "decode", "message"), ROUND_TRIPS, ids=ROUND_TRIP_IDS)
def test_trailing_bytes_are_rejected(encode, decode, message):
    with pytest.raises(DecodeError, match="trailing"):
        decode(encode(message) + b"\x00", 0)


def test_decoder_fills_partition_topic_name_from_its_topic():
    request = rich_leader_and_isr()
    request.topic_states[0].partition_states[0].topic_name = "ignored: not on the wire"
    decoded = control.decode_leader_and_isr_request(control.encode_leader_and_isr_request(request), 0)
    assert decoded.topic_states[0].partition_states[0].topic_name == "alpha"
    um = control.decode_update_metadata_request(control.encode_update_metadata_request(rich_update_metadata()), 0)
    assert [p.topic_name for p in um.topic_states[0].partition_states] == ["t", "t"]


# --- byte-exact encodings, written field by field from the Kafka JSON schemas --------------------------------

def _hex_with_comments(text: str) -> bytes:
    """Each line: hex bytes, then two or more spaces, then a comment."""
    out = bytearray()
    for line in text.strip().splitlines():
        hex_part = line.strip().split("  ")[0]
        out += bytes.fromhex(hex_part.replace(" ", ""))
    return bytes(out)


LEADER_AND_ISR_V7 = _hex_with_comments(f"""
    00000001                  ControllerId 1
    01                        isKRaftController true
    00000005                  ControllerEpoch 5
    000000000000004d          BrokerEpoch 77
    02                        Type 2 (full)
    02                        TopicStates: compact array of 1
    02 74                     TopicName "t"
    {UUID_1_HEX}  TopicId
    02                        PartitionStates: 1 (no TopicName in v2+)
    00000000                  PartitionIndex 0
    00000005                  ControllerEpoch 5
    00000001                  Leader 1
    00000003                  LeaderEpoch 3
    02 00000001               Isr [1]
    00000009                  PartitionEpoch 9
    03 00000001 00000002      Replicas [1, 2]
    01                        AddingReplicas []
    02 00000003               RemovingReplicas [3]
    01                        IsNew true
    01                        LeaderRecoveryState 1
    00                        partition tagged fields
    00                        topic tagged fields
    02                        LiveLeaders: 1
    00000001                  BrokerId 1
    02 68                     HostName "h"
    00002384                  Port 9092
    00                        live leader tagged fields
    00                        request tagged fields
""")


def test_leader_and_isr_request_exact_bytes():
    request = LeaderAndIsrRequest(
        controller_id=1, controller_epoch=5, broker_epoch=77, type=2, is_kraft_controller=True,
        topic_states=[LeaderAndIsrTopicState("t", TOPIC_ID_1, [
            LeaderAndIsrPartitionState("t", 0, 5, 1, 3, [1], 9, [1, 2], [], [3], True, 1)])],
        live_leaders=[LiveLeader(1, "h", 9092)],
    )
    assert control.encode_leader_and_isr_request(request) == LEADER_AND_ISR_V7
    assert control.decode_leader_and_isr_request(LEADER_AND_ISR_V7, 0) == request


def test_leader_and_isr_response_exact_bytes():
    wire = _hex_with_comments(f"""
        0000                  ErrorCode 0
        02                    Topics: 1
        {UUID_1_HEX}  TopicId
        02                    PartitionErrors: 1
        00000004              PartitionIndex 4
        0006                  ErrorCode 6 (NOT_LEADER_OR_FOLLOWER)
        00                    partition tagged fields
        00                    topic tagged fields
        00                    response tagged fields
    """)
    response = LeaderAndIsrResponse(0, [LeaderAndIsrTopicError(TOPIC_ID_1, [LeaderAndIsrPartitionError(4, 6)])])
    assert control.encode_leader_and_isr_response(response) == wire
    assert control.decode_leader_and_isr_response(wire, 0) == response


UPDATE_METADATA_V8 = _hex_with_comments(f"""
    00000003                  ControllerId 3
    00                        isKRaftController false
    00000008                  ControllerEpoch 8 (Type is tagged: it goes at the end)
    0000000000000063          BrokerEpoch 99
    02                        TopicStates: 1
    02 74                     TopicName "t"
    {UUID_1_HEX}  TopicId
    02                        PartitionStates: 1 (no TopicName in v5+)
    00000002                  PartitionIndex 2
    00000008                  ControllerEpoch 8
    00000001                  Leader 1
    00000004                  LeaderEpoch 4
    02 00000001               Isr [1]
    00000006                  ZkVersion 6
    03 00000001 00000002      Replicas [1, 2]
    02 00000002               OfflineReplicas [2]
    00                        partition tagged fields
    00                        topic tagged fields
    03                        LiveBrokers: 2
    00000001                  Id 1
    02                        Endpoints: 1
    00002384                  Port 9092
    02 61                     Host "a"
    03 504c                   Listener "PL"
    0001                      SecurityProtocol 1 (SSL)
    00                        endpoint tagged fields
    02 72                     Rack "r"
    00                        broker tagged fields
    00000002                  Id 2
    01                        Endpoints: 0
    00                        Rack null
    00                        broker tagged fields
    01                        request tagged fields: 1
    00 01 01                  tag 0 (Type), 1 byte, value 1 (incremental)
""")


def test_update_metadata_request_exact_bytes():
    request = UpdateMetadataRequest(
        controller_id=3, controller_epoch=8, broker_epoch=99, type=1,
        topic_states=[UpdateMetadataTopicState("t", TOPIC_ID_1, [
            UpdateMetadataPartitionState("t", 2, 8, 1, 4, [1], 6, [1, 2], [2])])],
        live_brokers=[UpdateMetadataBroker(1, [UpdateMetadataEndpoint(9092, "a", "PL", 1)], "r"),
                      UpdateMetadataBroker(2, [], None)],
    )
    assert control.encode_update_metadata_request(request) == UPDATE_METADATA_V8
    assert control.decode_update_metadata_request(UPDATE_METADATA_V8, 0) == request


def test_update_metadata_default_type_is_not_written():
    """Kafka writes a tagged field only when it differs from its default (0 for Type)."""
    request = UpdateMetadataRequest(3, 8, 99, [], [])
    assert control.encode_update_metadata_request(request) == h("00000003 00 00000008 0000000000000063 01 01 00")


def test_update_metadata_unknown_tag_is_skipped_and_bad_type_tag_rejected():
    head = h("00000003 00 00000008 0000000000000063 01 01")
    decoded = control.decode_update_metadata_request(head + h("02 00 01 02 05 03 aabbcc"), 0)
    assert decoded.type == 2
    with pytest.raises(DecodeError):
        control.decode_update_metadata_request(head + h("01 00 02 0001"), 0)


def test_update_metadata_response_exact_bytes():
    assert control.encode_update_metadata_response(UpdateMetadataResponse(41)) == h("0029 00")
    assert control.decode_update_metadata_response(h("0029 00"), 0) == UpdateMetadataResponse(41)


STOP_REPLICA_V4 = _hex_with_comments("""
    00000001                  ControllerId 1
    01                        isKRaftController true
    00000002                  ControllerEpoch 2
    0000000000000003          BrokerEpoch 3
    02                        TopicStates: 1
    02 78                     TopicName "x"
    03                        PartitionStates: 2
    00000000                  PartitionIndex 0
    ffffffff                  LeaderEpoch -1
    01                        DeletePartition true
    00                        partition tagged fields
    00000001                  PartitionIndex 1
    00000005                  LeaderEpoch 5
    00                        DeletePartition false
    00                        partition tagged fields
    00                        topic tagged fields
    00                        request tagged fields
""")


def test_stop_replica_request_exact_bytes():
    request = StopReplicaRequest(1, 2, 3, [StopReplicaTopicState("x", [StopReplicaPartitionState(0, -1, True),
                                                                       StopReplicaPartitionState(1, 5, False)])],
                                 is_kraft_controller=True)
    assert control.encode_stop_replica_request(request) == STOP_REPLICA_V4
    assert control.decode_stop_replica_request(STOP_REPLICA_V4, 0) == request


def test_stop_replica_response_exact_bytes():
    wire = h("0000 02 02 78 00000001 0003 00 00")
    response = StopReplicaResponse(0, [StopReplicaPartitionError("x", 1, 3)])
    assert control.encode_stop_replica_response(response) == wire
    assert control.decode_stop_replica_response(wire, 0) == response


def test_tagged_fields_of_nested_structs_are_skipped():
    # STOP_REPLICA_V4 with an unknown tag (7, two bytes) in the first partition's tagged fields.
    marker = h("ffffffff 01 00")
    assert STOP_REPLICA_V4.count(marker) == 1
    wire = STOP_REPLICA_V4.replace(marker, h("ffffffff 01 01 07 02 abcd"))
    assert control.decode_stop_replica_request(wire, 0) == control.decode_stop_replica_request(STOP_REPLICA_V4, 0)


# --- malformed input -----------------------------------------------------------------------------------------

HUGE = h("ffffffff0f")  # uvarint 2**32 - 1: a compact array claiming ~4 billion elements


@pytest.mark.parametrize(("decode", "wire"), [
    (control.decode_stop_replica_request, h("00000001 00 00000002 0000000000000003") + HUGE),
    (control.decode_leader_and_isr_request, h("00000001 00 00000002 0000000000000003 00") + HUGE),
    (control.decode_leader_and_isr_response, h("0000") + HUGE),
    (control.decode_update_metadata_request, h("00000001 00 00000002 0000000000000003 01") + HUGE),
    (control.decode_stop_replica_response, h("0000") + HUGE + b"\x00" * 64),
    # an int32 array (Isr) inside a partition state
    (control.decode_leader_and_isr_request,
     h(f"00000001 00 00000002 0000000000000003 00 02 0274 {UUID_1_HEX} 02 00000000 00000001 00000001 00000001")
     + HUGE + b"\x00" * 64),
])
def test_huge_array_length_is_rejected_without_allocating(decode, wire):
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError):
            decode(wire, 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_null_for_a_non_nullable_array_or_string_is_rejected():
    # TopicStates compact length 0 means null; Kafka's schema does not allow it.
    with pytest.raises(DecodeError, match="null"):
        control.decode_stop_replica_request(h("00000001 00 00000002 0000000000000003 00 00"), 0)
    # TopicName null
    with pytest.raises(DecodeError, match="null"):
        control.decode_stop_replica_request(h("00000001 00 00000002 0000000000000003 02 00 01 00 00"), 0)
    # AddingReplicas null (the schema's "or null" prose notwithstanding, the field is not nullable)
    wire = LEADER_AND_ISR_V7.replace(h("00000009 03 00000001 00000002 01"), h("00000009 03 00000001 00000002 00"))
    assert wire != LEADER_AND_ISR_V7
    with pytest.raises(DecodeError, match="AddingReplicas"):
        control.decode_leader_and_isr_request(wire, 0)


# --- ApiSpec entries and the kio-backed APIs -----------------------------------------------------------------

def test_control_api_specs_are_single_flexible_versions():
    for key, version in ((ApiKey.LEADER_AND_ISR, control.LEADER_AND_ISR_VERSION),
                         (ApiKey.STOP_REPLICA, control.STOP_REPLICA_VERSION),
                         (ApiKey.UPDATE_METADATA, control.UPDATE_METADATA_VERSION)):
        spec = SUPPORTED_APIS[key]
        assert (spec.min_version, spec.max_version) == (version, version)
        assert request_header_version(key, version) == 2
        assert response_header_version(key, version) == 1


def test_sasl_and_alter_partition_header_versions():
    assert [request_header_version(ApiKey.SASL_HANDSHAKE, v) for v in (0, 1)] == [1, 1]
    assert [response_header_version(ApiKey.SASL_HANDSHAKE, v) for v in (0, 1)] == [0, 0]
    assert [request_header_version(ApiKey.SASL_AUTHENTICATE, v) for v in (0, 1, 2)] == [1, 1, 2]
    assert [response_header_version(ApiKey.SASL_AUTHENTICATE, v) for v in (0, 1, 2)] == [0, 0, 1]
    assert [request_header_version(ApiKey.ALTER_PARTITION, v) for v in (2, 3)] == [2, 2]
    assert [response_header_version(ApiKey.ALTER_PARTITION, v) for v in (2, 3)] == [1, 1]


@pytest.mark.parametrize("version", [0, 1])
def test_sasl_handshake_round_trip(version):
    request = decode_request(ApiKey.SASL_HANDSHAKE, version,
                             encode_request(ApiKey.SASL_HANDSHAKE, version, {"mechanism": "PLAIN"}), 0)
    assert request.mechanism == "PLAIN"
    data = encode_response(ApiKey.SASL_HANDSHAKE, version, {"error_code": 33, "mechanisms": ["PLAIN", "SCRAM-SHA-256"]})
    # int16 error code, int32 array length, int16-length strings: not flexible in any version
    assert data == h("0021 00000002 0005") + b"PLAIN" + h("000d") + b"SCRAM-SHA-256"
    response = decode_response(ApiKey.SASL_HANDSHAKE, version, data, 0)
    assert (response.error_code, response.mechanisms) == (33, ("PLAIN", "SCRAM-SHA-256"))


@pytest.mark.parametrize("version", [0, 1, 2])
def test_sasl_authenticate_round_trip(version):
    token = b"\x00alice\x00secret"
    request = decode_request(ApiKey.SASL_AUTHENTICATE, version,
                             encode_request(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token}), 0)
    assert request.auth_bytes == token
    body = {"error_code": 58, "error_message": "bad password", "auth_bytes": b"", "session_lifetime": 3_600_000}
    response = decode_response(ApiKey.SASL_AUTHENTICATE, version,
                               encode_response(ApiKey.SASL_AUTHENTICATE, version, body), 0)
    assert (response.error_code, response.error_message, response.auth_bytes) == (58, "bad password", b"")
    if version >= 1:  # SessionLifetimeMs is v1+
        assert response.session_lifetime.total_seconds() == 3600


@pytest.mark.parametrize("version", [2, 3])
def test_alter_partition_round_trip(version):
    if version == 2:
        isr = {"new_isr": [1, 2]}
    else:  # v3 replaced NewIsr by NewIsrWithEpochs (KIP-903)
        isr = {"new_isr_with_epochs": [{"broker_id": 1, "broker_epoch": 10}, {"broker_id": 2, "broker_epoch": 20}]}
    body = {"broker_id": 1, "broker_epoch": 10, "topics": [
        {"topic_id": TOPIC_ID_2, "partitions": [
            {"partition_index": 0, "leader_epoch": 4, "leader_recovery_state": 0, "partition_epoch": 7, **isr}]}]}
    request = decode_request(ApiKey.ALTER_PARTITION, version, encode_request(ApiKey.ALTER_PARTITION, version, body), 0)
    assert request.broker_id == 1 and request.broker_epoch == 10
    partition = request.topics[0].partitions[0]
    assert request.topics[0].topic_id == TOPIC_ID_2
    assert (partition.partition_index, partition.leader_epoch, partition.partition_epoch) == (0, 4, 7)
    if version == 2:
        assert partition.new_isr == (1, 2)
    else:
        assert [(b.broker_id, b.broker_epoch) for b in partition.new_isr_with_epochs] == [(1, 10), (2, 20)]
    response_body = {"throttle_time": 0, "error_code": 0, "topics": [
        {"topic_id": TOPIC_ID_2, "partitions": [
            {"partition_index": 0, "error_code": 0, "leader_id": 1, "leader_epoch": 4, "isr": [1, 2],
             "leader_recovery_state": 0, "partition_epoch": 8}]}]}
    response = decode_response(ApiKey.ALTER_PARTITION, version,
                               encode_response(ApiKey.ALTER_PARTITION, version, response_body), 0)
    result = response.topics[0].partitions[0]
    assert (result.leader_id, result.isr, result.partition_epoch) == (1, (1, 2), 8)


def test_leader_and_isr_topic_configs_travel_in_a_tagged_field():
    from replog.protocol.control import (
        LeaderAndIsrPartitionState,
        LeaderAndIsrRequest,
        LeaderAndIsrTopicState,
        decode_leader_and_isr_request,
        encode_leader_and_isr_request,
    )
    topic_id = uuid.UUID(int=7)
    state = LeaderAndIsrPartitionState("t", 0, 1, 2, 3, [2], 4, [2])
    with_configs = LeaderAndIsrRequest(1, 1, -1, [LeaderAndIsrTopicState(
        "t", topic_id, [state], {"min.insync.replicas": "2", "retention.ms": "1000"})], [])
    without = LeaderAndIsrRequest(1, 1, -1, [LeaderAndIsrTopicState("t", topic_id, [state])], [])
    encoded = encode_leader_and_isr_request(with_configs)
    assert decode_leader_and_isr_request(encoded, 0) == with_configs
    # Without configs the topic state ends in an empty tagged-field section, exactly Kafka's encoding.
    assert len(encode_leader_and_isr_request(without)) < len(encoded)
    assert decode_leader_and_isr_request(encode_leader_and_isr_request(without), 0).topic_states[0].configs == {}


def test_update_metadata_carries_acls_in_tag_10002():
    acls = [(2, "orders", 3, "User:alice", "*", 3, 3), (3, "g-", 4, "User:*", "10.0.0.1", 8, 2)]
    request = UpdateMetadataRequest(3, 8, 99, [], [], type=2, acls=acls)
    encoded = control.encode_update_metadata_request(request)
    assert control.decode_update_metadata_request(encoded, 0) == request
    without = control.encode_update_metadata_request(UpdateMetadataRequest(3, 8, 99, [], [], type=2))
    assert control.decode_update_metadata_request(without, 0).acls == []
    head = h("00000003 00 00000008 0000000000000063 01 01")
    with pytest.raises(DecodeError):  # tag 10002 (varint 92 4e) of 2 bytes declaring 4 ACLs
        control.decode_update_metadata_request(head + h("02 00 01 02 92 4e 02 05 02"), 0)
