"""The array-count walker that runs before kio: it must agree with kio's layout on every valid message
(or it would reject good requests and responses) and refuse counts the remaining bytes cannot hold."""

import pytest

from replog.protocol.apis import SUPPORTED_APIS, ApiKey
from replog.protocol.kio_bounds import check_array_counts
from replog.protocol.messages import build, encode, request_type, response_type
from replog.protocol.primitives import DecodeError
from tests.fuzz.corpus import sample_fields

# LeaderAndIsr, StopReplica and UpdateMetadata have no kio schema (control.py codes them by hand).
HAND_CODED = {ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA}
KIO_SCHEMAS = [
    (key, version, kind)
    for key, spec in SUPPORTED_APIS.items() if key not in HAND_CODED
    for version in range(spec.min_version, spec.max_version + 1)
    for kind in ("request", "response")
]


def schema(key: int, version: int, kind: str) -> type:
    return request_type(key, version) if kind == "request" else response_type(key, version)


@pytest.mark.parametrize(("key", "version", "kind"), KIO_SCHEMAS)
def test_walk_ends_where_kio_encoding_ends(key, version, kind):
    """Every field is filled in, tagged ones included, so every array, struct and tag is walked."""
    cls = schema(key, version, kind)
    encoded = encode(build(cls, sample_fields(cls)))
    assert check_array_counts(cls, b"pad" + encoded, 3) == 3 + len(encoded)


@pytest.mark.parametrize(("version", "count"), [(8, b"\x7f\xff\xff\xff"), (12, b"\xff\xff\xff\xff\x0f")])
def test_count_beyond_the_remaining_bytes_is_refused(version, count):
    cls = request_type(3, version)  # Metadata: its first field is the topics array
    with pytest.raises(DecodeError, match="cannot fit"):
        check_array_counts(cls, count + b"\x00" * 64, 0)


def test_count_that_fits_bytes_but_not_elements_is_refused():
    """Metadata v12 topics are at least 18 bytes each (uuid, name, tags): 10 cannot fit in 60 bytes."""
    cls = request_type(3, 12)
    with pytest.raises(DecodeError, match="cannot fit"):
        check_array_counts(cls, bytes([11]) + b"\x00" * 60, 0)


@pytest.mark.parametrize(("version", "null_topics"), [(8, b"\xff\xff\xff\xff"), (12, b"\x00")])
def test_null_is_accepted_where_the_version_allows_it(version, null_topics):
    """Metadata v1+ topics are nullable: null asks for every topic."""
    assert check_array_counts(request_type(3, version), null_topics + b"\x00" * 8, 0) > 0


def test_null_is_refused_where_the_version_does_not_allow_it():
    """Metadata v0 predates nullable topics (replog serves v1+, but kio has the v0 schema)."""
    with pytest.raises(DecodeError, match="not nullable"):
        check_array_counts(request_type(3, 0), b"\xff\xff\xff\xff" + b"\x00" * 8, 0)
