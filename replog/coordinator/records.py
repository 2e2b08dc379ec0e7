"""Kafka's __consumer_offsets record formats, byte for byte (group-coordinator/.../common/message/*.json).

Every key and every value starts with an int16 version. Key versions 0 and 1 are an OffsetCommitKey (group,
topic, partition), version 2 a GroupMetadataKey (group); newer Kafkas add other record types with higher
key versions, which a classic coordinator skips (UnknownKey). A null value is a tombstone: the log cleaner
keeps only the latest record per key, and a tombstone deletes the key.

Values: OffsetCommitValue versions 0-4 and GroupMetadataValue versions 0-4, version 4 being flexible (compact
lengths, tagged fields). We write what Kafka 3.x writes (MetadataVersion.offsetCommitValueVersion and
groupMetadataValueVersion): offset commits v3, or v1 when the commit carries an explicit expire timestamp
(OffsetCommit v2-v4 retention time); group metadata v3.

Decoders read with primitives.Reader, which checks every length against the bytes that remain, and refuse
trailing bytes, so a truncated or padded record raises DecodeError rather than decoding to something else.
"""

from __future__ import annotations

from dataclasses import dataclass

from replog.protocol.primitives import DecodeError, Reader, Writer

OFFSET_COMMIT_KEY_VERSION = 1  # Kafka writes 1; 0 has the same layout
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1  # the only version with an expireTimestamp field
GROUP_METADATA_VALUE_VERSION = 3
MAX_VALUE_VERSION = 4
FIRST_FLEXIBLE_VERSION = 4
NO_TIMESTAMP = -1
NO_LEADER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class UnknownKey:
    """A record type this coordinator does not handle (a newer Kafka's consumer-group records)."""

    version: int


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = NO_LEADER_EPOCH  # versions 3+
    expire_timestamp: int = NO_TIMESTAMP  # version 1 only


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes  # the member's metadata for the group's protocol, passed through untouched
    assignment: bytes
    rebalance_timeout: int = -1  # versions 1+
    group_instance_id: str | None = None  # versions 3+


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    members: tuple[MemberMetadataValue, ...] = ()
    current_state_timestamp: int = NO_TIMESTAMP  # versions 2+


RecordKey = OffsetCommitKey | GroupMetadataKey | UnknownKey

# -------------------------------------------------------------------- keys


def encode_key(key: OffsetCommitKey | GroupMetadataKey) -> bytes:
    w = Writer()
    if isinstance(key, OffsetCommitKey):
        w.int16(OFFSET_COMMIT_KEY_VERSION)
        w.string(key.group, compact=False)
        w.string(key.topic, compact=False)
        w.int32(key.partition)
    else:
        w.int16(GROUP_METADATA_KEY_VERSION)
        w.string(key.group, compact=False)
    return bytes(w.buf)


def decode_key(data: bytes | memoryview) -> RecordKey:
    r = Reader(data)
    version = r.int16()
    if version in (0, 1):
        key: RecordKey = OffsetCommitKey(r.string(compact=False), r.string(compact=False), r.int32())
    elif version == GROUP_METADATA_KEY_VERSION:
        key = GroupMetadataKey(r.string(compact=False))
    else:
        return UnknownKey(version)  # its layout is unknown to us: do not read further
    _expect_end(r)
    return key


# ---------------------------------------------------------- offset commits


def offset_commit_value_version(value: OffsetCommitValue) -> int:
    """Kafka 3.x: v1 for a commit with an explicit expire timestamp, else v3."""
    if value.expire_timestamp != NO_TIMESTAMP:
        return OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
    return OFFSET_COMMIT_VALUE_VERSION


def encode_offset_commit_value(value: OffsetCommitValue, version: int | None = None) -> bytes:
    version = offset_commit_value_version(value) if version is None else version
    assert 0 <= version <= MAX_VALUE_VERSION, version
    assert version == 1 or value.expire_timestamp == NO_TIMESTAMP, "only v1 has an expire timestamp"
    flexible = version >= FIRST_FLEXIBLE_VERSION
    w = Writer()
    w.int16(version)
    w.int64(value.offset)
    if version >= 3:
        w.int32(value.leader_epoch)
    w.string(value.metadata, compact=flexible)
    w.int64(value.commit_timestamp)
    if version == 1:
        w.int64(value.expire_timestamp)
    if flexible:
        w.empty_tagged_fields()
    return bytes(w.buf)


def decode_offset_commit_value(data: bytes | memoryview) -> OffsetCommitValue:
    r = Reader(data)
    version = _value_version(r)
    flexible = version >= FIRST_FLEXIBLE_VERSION
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else NO_LEADER_EPOCH
    metadata = r.string(compact=flexible)
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if version == 1 else NO_TIMESTAMP
    if flexible:
        r.skip_tagged_fields()
    _expect_end(r)
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


# ----------------------------------------------------------- group metadata


def encode_group_metadata_value(
    value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION
) -> bytes:
    assert 0 <= version <= MAX_VALUE_VERSION, version
    flexible = version >= FIRST_FLEXIBLE_VERSION
    w = Writer()
    w.int16(version)
    w.string(value.protocol_type, compact=flexible)
    w.int32(value.generation)
    w.string(value.protocol, compact=flexible)
    w.string(value.leader, compact=flexible)
    if version >= 2:
        w.int64(value.current_state_timestamp)
    w.array_length(len(value.members), compact=flexible)
    for member in value.members:
        _encode_member(w, member, version)
    if flexible:
        w.empty_tagged_fields()
    return bytes(w.buf)


def _encode_member(w: Writer, member: MemberMetadataValue, version: int) -> None:
    flexible = version >= FIRST_FLEXIBLE_VERSION
    w.string(member.member_id, compact=flexible)
    if version >= 3:
        w.string(member.group_instance_id, compact=flexible)
    w.string(member.client_id, compact=flexible)
    w.string(member.client_host, compact=flexible)
    if version >= 1:
        w.int32(member.rebalance_timeout)
    w.int32(member.session_timeout)
    for data in (member.subscription, member.assignment):
        w.bytes_length(len(data), compact=flexible)
        w.buf += data
    if flexible:
        w.empty_tagged_fields()


def decode_group_metadata_value(data: bytes | memoryview) -> GroupMetadataValue:
    r = Reader(data)
    version = _value_version(r)
    flexible = version >= FIRST_FLEXIBLE_VERSION
    protocol_type = r.string(compact=flexible)
    generation = r.int32()
    protocol = r.nullable_string(compact=flexible)
    leader = r.nullable_string(compact=flexible)
    current_state_timestamp = r.int64() if version >= 2 else NO_TIMESTAMP
    count = r.array_length(compact=flexible)
    if count < 0:
        raise DecodeError("null members array")
    members = tuple(_decode_member(r, version) for _ in range(count))
    if flexible:
        r.skip_tagged_fields()
    _expect_end(r)
    return GroupMetadataValue(protocol_type, generation, protocol, leader, members, current_state_timestamp)


def _decode_member(r: Reader, version: int) -> MemberMetadataValue:
    flexible = version >= FIRST_FLEXIBLE_VERSION
    member_id = r.string(compact=flexible)
    group_instance_id = r.nullable_string(compact=flexible) if version >= 3 else None
    client_id = r.string(compact=flexible)
    client_host = r.string(compact=flexible)
    rebalance_timeout = r.int32() if version >= 1 else -1
    session_timeout = r.int32()
    subscription = _required_bytes(r, flexible)
    assignment = _required_bytes(r, flexible)
    if flexible:
        r.skip_tagged_fields()
    return MemberMetadataValue(
        member_id,
        client_id,
        client_host,
        session_timeout,
        subscription,
        assignment,
        rebalance_timeout,
        group_instance_id,
    )


# ------------------------------------------------------------------ helpers


def _value_version(r: Reader) -> int:
    version = r.int16()
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise DecodeError(f"unknown value version {version}")
    return version


def _required_bytes(r: Reader, flexible: bool) -> bytes:
    data = r.nullable_bytes(compact=flexible)
    if data is None:
        raise DecodeError("null where bytes are required")
    return bytes(data)


def _expect_end(r: Reader) -> None:
    if r.remaining:
        raise DecodeError(f"{r.remaining} bytes after the record")
