"""The __consumer_offsets record formats (coordinator/records.py): byte-exact with Kafka's schemas, round
trips at every version, and decoders that refuse truncated or padded input instead of misreading it."""

import struct

import pytest

from replog.coordinator import records as rec
from replog.protocol.primitives import DecodeError

MEMBERS = (
    rec.MemberMetadataValue(
        "m-1", "client-a", "/10.0.0.1", 10000, b"\x00\x01sub", b"\x00\x01asg", 60000, "i-1"
    ),
    rec.MemberMetadataValue("m-2", "client-b", "/10.0.0.2", 45000, b"", b"", 300000, None),
)
GROUP = rec.GroupMetadataValue("consumer", 7, "range", "m-1", MEMBERS, 1_700_000_000_000)
EMPTY_GROUP = rec.GroupMetadataValue("", 8, None, None, (), 1_700_000_000_500)


def s16(text: str) -> bytes:
    """A non-flexible string: int16 length, UTF-8."""
    return struct.pack(">h", len(text.encode())) + text.encode()


def c(text: str) -> bytes:
    """A compact (flexible) string: unsigned varint length + 1 (all lengths here are < 127)."""
    return bytes([len(text.encode()) + 1]) + text.encode()


# --------------------------------------------------------- bytes built by hand from Kafka's JSON schemas


def test_offset_commit_key_matches_the_schema_byte_for_byte():
    expected = struct.pack(">h", 1) + s16("grp") + s16("orders") + struct.pack(">i", 3)
    assert rec.encode_key(rec.OffsetCommitKey("grp", "orders", 3)) == expected
    assert rec.decode_key(expected) == rec.OffsetCommitKey("grp", "orders", 3)
    # Version 0 has the same fields.
    assert rec.decode_key(struct.pack(">h", 0) + expected[2:]) == rec.OffsetCommitKey("grp", "orders", 3)


def test_group_metadata_key_matches_the_schema_byte_for_byte():
    expected = struct.pack(">h", 2) + s16("grp")
    assert rec.encode_key(rec.GroupMetadataKey("grp")) == expected
    assert rec.decode_key(expected) == rec.GroupMetadataKey("grp")


def test_offset_commit_value_v3_matches_the_schema_byte_for_byte():
    # version, offset int64, leaderEpoch int32 (3+), metadata string, commitTimestamp int64
    expected = struct.pack(">hqi", 3, 42, 5) + s16("meta") + struct.pack(">q", 1234)
    value = rec.OffsetCommitValue(42, "meta", 1234, leader_epoch=5)
    assert rec.encode_offset_commit_value(value) == expected
    assert rec.decode_offset_commit_value(expected) == value


def test_offset_commit_value_with_an_expire_timestamp_is_written_as_v1():
    # version, offset, metadata, commitTimestamp, expireTimestamp (version 1 only); no leader epoch
    expected = struct.pack(">hq", 1, 42) + s16("") + struct.pack(">qq", 1000, 5000)
    value = rec.OffsetCommitValue(42, "", 1000, expire_timestamp=5000)
    assert rec.encode_offset_commit_value(value) == expected
    assert rec.decode_offset_commit_value(expected) == value


def test_offset_commit_value_v4_is_flexible():
    expected = struct.pack(">hqi", 4, 42, 5) + c("meta") + struct.pack(">q", 1234) + b"\x00"
    value = rec.OffsetCommitValue(42, "meta", 1234, leader_epoch=5)
    assert rec.encode_offset_commit_value(value, 4) == expected
    assert rec.decode_offset_commit_value(expected) == value


def test_group_metadata_value_v3_matches_the_schema_byte_for_byte():
    member = MEMBERS[0]
    member_bytes = (
        s16("m-1")
        + s16("i-1")
        + s16("client-a")
        + s16("/10.0.0.1")
        + struct.pack(">ii", 60000, 10000)  # rebalanceTimeout (1+), sessionTimeout
        + struct.pack(">i", 5)
        + b"\x00\x01sub"
        + struct.pack(">i", 5)
        + b"\x00\x01asg"
    )
    expected = (
        struct.pack(">h", 3)
        + s16("consumer")
        + struct.pack(">i", 7)
        + s16("range")
        + s16("m-1")
        + struct.pack(">q", 1_700_000_000_000)
        + struct.pack(">i", 1)
        + member_bytes
    )
    value = rec.GroupMetadataValue("consumer", 7, "range", "m-1", (member,), 1_700_000_000_000)
    assert rec.encode_group_metadata_value(value) == expected
    assert rec.decode_group_metadata_value(expected) == value


def test_empty_group_metadata_value_has_null_protocol_and_leader():
    expected = (
        struct.pack(">h", 3)
        + s16("")
        + struct.pack(">i", 8)
        + struct.pack(">hh", -1, -1)
        + struct.pack(">q", 1_700_000_000_500)
        + struct.pack(">i", 0)
    )
    assert rec.encode_group_metadata_value(EMPTY_GROUP) == expected
    assert rec.decode_group_metadata_value(expected) == EMPTY_GROUP


def test_group_metadata_value_v4_uses_compact_fields_and_tagged_fields_per_struct():
    member = MEMBERS[1]
    member_bytes = (
        c("m-2")
        + b"\x00"
        + c("client-b")
        + c("/10.0.0.2")
        + struct.pack(">ii", 300000, 45000)
        + b"\x01"
        + b"\x01"
        + b"\x00"  # empty subscription, empty assignment, no tagged fields
    )
    expected = (
        struct.pack(">h", 4)
        + c("consumer")
        + struct.pack(">i", 7)
        + c("range")
        + b"\x00"
        + struct.pack(">q", -1)
        + b"\x02"
        + member_bytes
        + b"\x00"
    )
    value = rec.GroupMetadataValue("consumer", 7, "range", None, (member,))
    assert rec.encode_group_metadata_value(value, 4) == expected
    assert rec.decode_group_metadata_value(expected) == value


# ---------------------------------------------------------------------------------------- round trips


def dropped_by_version(value: rec.GroupMetadataValue, version: int) -> rec.GroupMetadataValue:
    """What survives a write at `version`: fields newer than it come back as their defaults."""
    members = tuple(
        rec.MemberMetadataValue(
            m.member_id,
            m.client_id,
            m.client_host,
            m.session_timeout,
            m.subscription,
            m.assignment,
            m.rebalance_timeout if version >= 1 else -1,
            m.group_instance_id if version >= 3 else None,
        )
        for m in value.members
    )
    timestamp = value.current_state_timestamp if version >= 2 else -1
    return rec.GroupMetadataValue(
        value.protocol_type, value.generation, value.protocol, value.leader, members, timestamp
    )


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("value", [GROUP, EMPTY_GROUP], ids=["group with members", "empty group"])
def test_group_metadata_value_round_trips_at_every_version(version, value):
    data = rec.encode_group_metadata_value(value, version)
    assert rec.decode_group_metadata_value(data) == dropped_by_version(value, version)


@pytest.mark.parametrize(
    ("version", "value", "expected"),
    [
        (0, rec.OffsetCommitValue(9, "m", 10, 4), rec.OffsetCommitValue(9, "m", 10)),
        (
            1,
            rec.OffsetCommitValue(9, "m", 10, expire_timestamp=20),
            rec.OffsetCommitValue(9, "m", 10, -1, 20),
        ),
        (2, rec.OffsetCommitValue(9, "m", 10, 4), rec.OffsetCommitValue(9, "m", 10)),
        (3, rec.OffsetCommitValue(9, "m", 10, 4), rec.OffsetCommitValue(9, "m", 10, 4)),
        (4, rec.OffsetCommitValue(9, "ünï", 10, 4), rec.OffsetCommitValue(9, "ünï", 10, 4)),
    ],
)
def test_offset_commit_value_round_trips_at_every_version(version, value, expected):
    assert rec.decode_offset_commit_value(rec.encode_offset_commit_value(value, version)) == expected


def test_keys_of_newer_record_types_are_reported_unknown_not_misread():
    assert rec.decode_key(struct.pack(">h", 3) + s16("grp")) == rec.UnknownKey(3)


# ---------------------------------------------------------------------------------------- bad input

ENCODED = {
    "offset commit key": (rec.encode_key(rec.OffsetCommitKey("grp", "orders", 3)), rec.decode_key),
    "group metadata key": (rec.encode_key(rec.GroupMetadataKey("grp")), rec.decode_key),
    "offset commit value v3": (
        rec.encode_offset_commit_value(rec.OffsetCommitValue(42, "meta", 1234, 5)),
        rec.decode_offset_commit_value,
    ),
    "offset commit value v4": (
        rec.encode_offset_commit_value(rec.OffsetCommitValue(42, "meta", 1234, 5), 4),
        rec.decode_offset_commit_value,
    ),
    "group metadata value v3": (rec.encode_group_metadata_value(GROUP), rec.decode_group_metadata_value),
    "group metadata value v4": (rec.encode_group_metadata_value(GROUP, 4), rec.decode_group_metadata_value),
}


@pytest.mark.parametrize("name", ENCODED)
def test_every_truncation_of_a_record_is_refused(name):
    data, decode = ENCODED[name]
    for end in range(len(data)):
        with pytest.raises(DecodeError):
            decode(data[:end])


@pytest.mark.parametrize("name", ENCODED)
def test_a_record_decodes_from_a_slice_of_a_larger_buffer(name):
    """Records come out of a fetched batch as memoryview slices, never copies."""
    data, decode = ENCODED[name]
    assert decode(memoryview(b"\xff" * 7 + data + b"\xff" * 5)[7:-5]) == decode(data)


@pytest.mark.parametrize("name", ENCODED)
def test_trailing_bytes_after_a_record_are_refused(name):
    data, decode = ENCODED[name]
    with pytest.raises(DecodeError):
        decode(data + b"\x00")


@pytest.mark.parametrize("version", [-1, 5, 32767])
def test_values_of_unknown_versions_are_refused(version):
    with pytest.raises(DecodeError):
        rec.decode_offset_commit_value(struct.pack(">hq", version, 1) + s16("") + struct.pack(">q", 0))
    with pytest.raises(DecodeError):
        rec.decode_group_metadata_value(struct.pack(">h", version) + s16("") + struct.pack(">i", 0))


def test_a_member_count_larger_than_the_record_is_refused_before_reading():
    data = struct.pack(">h", 3) + s16("") + struct.pack(">i", 0) + struct.pack(">hh", -1, -1)
    data += struct.pack(">qi", -1, 2**31 - 1)
    with pytest.raises(DecodeError):
        rec.decode_group_metadata_value(data)


def test_null_member_bytes_are_refused():
    member = (
        s16("m") + s16("c") + s16("h") + struct.pack(">i", 1) + struct.pack(">i", -1) + struct.pack(">i", 0)
    )
    data = struct.pack(">h", 0) + s16("consumer") + struct.pack(">i", 1) + s16("p") + s16("m")
    data += struct.pack(">i", 1) + member
    with pytest.raises(DecodeError):
        rec.decode_group_metadata_value(data)
