"""decode_request_header's one-struct path against the general Reader walk of the same bytes, field for field."""

import struct

import pytest

from replog.protocol.apis import ApiKey, request_header_version
from replog.protocol.headers import RequestHeader, decode_request_header, encode_request_header
from replog.protocol.primitives import DecodeError, Reader, Writer


def decode_with_reader(frame: bytearray) -> RequestHeader:
    """The header read field by field with the general Reader, as Kafka's RequestHeader.json lays it out."""
    reader = Reader(frame)
    api_key, api_version, correlation_id = reader.int16(), reader.int16(), reader.int32()
    client_id = reader.nullable_string(compact=False)
    if request_header_version(api_key, api_version) == 2:
        reader.skip_tagged_fields()
    return RequestHeader(api_key, api_version, correlation_id, client_id, reader.pos)


def header_with_tagged_fields(api_key: int, version: int, client_id: str) -> bytes:
    """A v2 header carrying two unknown tagged fields, which a broker must skip."""
    writer = Writer()
    writer.int16(api_key)
    writer.int16(version)
    writer.int32(7)
    writer.string(client_id, compact=False)
    writer.uvarint(2)
    for tag, value in ((0, b"abc"), (5, b"\x01" * 200)):
        writer.uvarint(tag)
        writer.uvarint(len(value))
        writer.buf += value
    return bytes(writer.buf)


BODY = b"\x00\x01\x02body"
HEADERS = {
    "v1, produce v8": encode_request_header(ApiKey.PRODUCE, 8, 1, "rdkafka"),
    "v2, produce v9": encode_request_header(ApiKey.PRODUCE, 9, 2, "rdkafka"),
    "v2, fetch v12, null client id": encode_request_header(ApiKey.FETCH, 12, -5, None),
    "v1, fetch v4, empty client id": encode_request_header(ApiKey.FETCH, 4, 2**31 - 1, ""),
    "v2, non-ASCII client id": encode_request_header(ApiKey.METADATA, 12, 3, "prödücer-☃"),
    "v2, tagged fields": header_with_tagged_fields(ApiKey.PRODUCE, 10, "c"),
    "v0-style api versions v3": encode_request_header(ApiKey.API_VERSIONS, 3, 4, "x" * 300),
}


@pytest.mark.parametrize("name", HEADERS)
def test_a_header_decodes_to_the_fields_the_general_reader_finds(name):
    frame = bytearray(HEADERS[name] + BODY)
    expected = decode_with_reader(frame)
    assert decode_request_header(frame) == expected
    assert decode_request_header(memoryview(frame)) == expected
    assert frame[expected.body_offset:] == BODY


MALFORMED = {
    "shorter than the fixed fields": struct.pack(">hhi", ApiKey.PRODUCE, 9, 1),
    "client id longer than the frame": struct.pack(">hhih", ApiKey.PRODUCE, 8, 1, 20) + b"abc",
    "negative client id length": struct.pack(">hhih", ApiKey.PRODUCE, 8, 1, -2),
    "client id not UTF-8": struct.pack(">hhih", ApiKey.PRODUCE, 8, 1, 2) + b"\xff\xfe",
    "v2 header without its tagged field section": struct.pack(">hhih", ApiKey.PRODUCE, 9, 1, 1) + b"c",
    "v2 tagged field longer than the frame": struct.pack(">hhih", ApiKey.PRODUCE, 9, 1, 1) + b"c\x01\x00\x09ab",
}


@pytest.mark.parametrize("name", MALFORMED)
def test_a_malformed_header_is_refused_as_the_general_reader_refuses_it(name):
    frame = bytearray(MALFORMED[name])
    with pytest.raises(DecodeError):
        decode_with_reader(frame)
    with pytest.raises(DecodeError):
        decode_request_header(frame)


def test_the_usual_header_is_read_without_the_general_reader(monkeypatch):
    """One struct call and the client id: a Reader costs a dozen Python calls per request."""
    readers = []
    monkeypatch.setattr(Reader, "__init__", lambda self, *a: readers.append(a) or setattr(self, "buf", None))
    for name in ("v1, produce v8", "v2, produce v9", "v2, fetch v12, null client id"):
        decode_request_header(bytearray(HEADERS[name] + BODY))
    assert readers == []
