"""Valid request frames for every API and version the broker advertises, and the mutations fuzzers apply.

A valid frame is the seed a mutation starts from: it gets a fuzzer past the header and the first fields, so
bit flips and hostile lengths land deep in the body. kio-schema requests are filled in generically (one
element in every array, so arrays have counts to corrupt); Produce carries a real record batch, and the
controller-to-broker APIs use replog's own encoders.
"""

import datetime
import random
import struct
import types
import typing
import uuid
from dataclasses import dataclass, fields, is_dataclass

from hypothesis import strategies as st

from replog.broker.handlers import BROKER_APIS
from replog.protocol import control
from replog.protocol.apis import SUPPORTED_APIS, ApiKey
from replog.protocol.headers import encode_request_header
from replog.protocol.messages import encode_request, request_type
from replog.protocol.produce import (
    ProducePartitionData,
    ProduceRequestData,
    ProduceTopicData,
    encode_produce_request,
)
from replog.protocol.records import Compression, build_batch

ADVERTISED_VERSIONS: list[tuple[int, int]] = [
    (key, version)
    for key in sorted(BROKER_APIS)
    for version in range(SUPPORTED_APIS[key].min_version, SUPPORTED_APIS[key].max_version + 1)
]

SAMPLE_BATCH = build_batch([(b"key", b"value", [("h", b"v")], 1_700_000_000_000),
                            (None, b"second", [], 1_700_000_000_001)])
SAMPLE_BATCHES = {codec: build_batch([(b"k", b"v" * 50, [], 1000)] * 3, compression=codec) for codec in Compression}

# Values a hostile peer puts where a length or count belongs: int16 and int32 extremes, and compact
# (unsigned varint, length + 1) encodings of huge, zero ("null"), and over-long values.
HOSTILE_LENGTHS: tuple[bytes, ...] = (
    struct.pack(">h", -1), struct.pack(">h", -2), struct.pack(">h", 0x7FFF),
    struct.pack(">i", -1), struct.pack(">i", -2), struct.pack(">i", 0x7FFFFFFF), struct.pack(">i", -(2**31)),
    struct.pack(">i", 1 << 24),
    b"\x00", b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x07", b"\xfe\xff\xff\xff\x07", b"\x80\x80\x80\x80\x80\x01",
)  # fmt: skip


def sample_body(api_key: int, version: int) -> bytes:
    if api_key == ApiKey.PRODUCE:
        request = ProduceRequestData(None, -1, 5000, [ProduceTopicData("t", [ProducePartitionData(
            0, memoryview(bytearray(SAMPLE_BATCH)))])])
        return b"".join(bytes(p) for p in encode_produce_request(version, request))
    if api_key == ApiKey.LEADER_AND_ISR:
        return control.encode_leader_and_isr_request(control.LeaderAndIsrRequest(
            1, 1, 1, [control.LeaderAndIsrTopicState("t", uuid.UUID(int=1), [control.LeaderAndIsrPartitionState(
                "t", 0, 1, 1, 1, [1, 2], 1, [1, 2])], {"min.insync.replicas": "1"})],
            [control.LiveLeader(1, "localhost", 9092)]))
    if api_key == ApiKey.UPDATE_METADATA:
        return control.encode_update_metadata_request(control.UpdateMetadataRequest(
            1, 1, 1, [control.UpdateMetadataTopicState("t", uuid.UUID(int=1), [control.UpdateMetadataPartitionState(
                "t", 0, 1, 1, 1, [1], 1, [1])])],
            [control.UpdateMetadataBroker(1, [control.UpdateMetadataEndpoint(9092, "localhost", "PLAINTEXT")])],
            acls=[(2, "t", 3, "User:a", "*", 3, 3)]))  # the ACLs' tagged field (10002) gets mutated too
    if api_key == ApiKey.STOP_REPLICA:
        return control.encode_stop_replica_request(control.StopReplicaRequest(
            1, 1, 1, [control.StopReplicaTopicState("t", [control.StopReplicaPartitionState(0, 1, True)])]))
    return encode_request(api_key, version, sample_fields(request_type(api_key, version)))


def sample_frame(api_key: int, version: int, correlation_id: int = 7) -> bytes:
    """A request without its size prefix: header, then body."""
    return encode_request_header(api_key, version, correlation_id, "fuzz") + sample_body(api_key, version)


def sample_fields(cls: type) -> dict:
    hints = typing.get_type_hints(cls)
    return {f.name: _sample_value(hints[f.name], f.metadata.get("kafka_type", "")) for f in fields(cls)}


def _sample_value(hint: typing.Any, kafka_type: str) -> typing.Any:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        (hint,) = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is tuple:
        return [_sample_value(typing.get_args(hint)[0], kafka_type)]
    if is_dataclass(hint):
        return sample_fields(hint)
    return _SAMPLE_PRIMITIVES[kafka_type]


_SAMPLE_PRIMITIVES = {
    "int8": 1, "int16": 1, "int32": 1, "int64": 1, "uint8": 1, "uint16": 1, "uint32": 1, "uint64": 1,
    "float64": 1.0, "bool": True, "error_code": 0, "timedelta_i32": 100, "timedelta_i64": 100,
    "datetime_i64": datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC), "uuid": uuid.UUID(int=1),
    "string": "t", "bytes": b"x", "records": SAMPLE_BATCH,
}  # fmt: skip


# --- mutations ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mutation:
    """One edit of a frame. kind: flip (bit `value` of byte `position`), truncate (to `position` bytes),
    extend (append `data`), overwrite (put `data` at `position`), insert (`data` before `position`)."""

    kind: str
    position: int = 0
    value: int = 0
    data: bytes = b""


MUTATION_KINDS = ("flip", "truncate", "extend", "overwrite", "insert")


def mutation_lists(*, max_position: int, max_data_size: int, max_count: int) -> st.SearchStrategy[list[Mutation]]:
    """Hypothesis lists of 1..max_count mutations anywhere in the first max_position bytes of a frame."""
    return st.lists(st.builds(
        Mutation,
        kind=st.sampled_from(MUTATION_KINDS),
        position=st.integers(0, max_position),
        value=st.integers(0, 7),
        data=st.one_of(st.sampled_from(HOSTILE_LENGTHS), st.binary(min_size=1, max_size=max_data_size)),
    ), min_size=1, max_size=max_count)


def apply_mutations(frame: bytes, mutations: list[Mutation]) -> bytearray:
    out = bytearray(frame)
    for m in mutations:
        position = m.position % (len(out) + 1)
        if m.kind == "flip" and out:
            out[position % len(out)] ^= 1 << m.value
        elif m.kind == "truncate":
            del out[position:]
        elif m.kind == "extend":
            out += m.data
        elif m.kind == "overwrite":
            out[position : position + len(m.data)] = m.data
        elif m.kind == "insert":
            out[position:position] = m.data
    return out


def random_mutations(rng: random.Random, frame_length: int) -> list[Mutation]:
    """1-4 mutations drawn from `rng`; half the data written is a hostile length."""
    mutations = []
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(MUTATION_KINDS)
        data = rng.choice(HOSTILE_LENGTHS) if rng.random() < 0.5 else rng.randbytes(rng.randint(1, 16))
        mutations.append(Mutation(kind, rng.randrange(frame_length + 1), rng.randrange(8), data))
    return mutations
