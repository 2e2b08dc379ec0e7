"""Request header v1/v2 decoding and response header v0/v1 encoding."""

import struct
from dataclasses import dataclass

from .apis import SUPPORTED_APIS, request_header_version
from .primitives import DecodeError, Reader, Writer

_KEY_VERSION_CORRELATION = struct.Struct(">hhi")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int  # where the request body starts in the frame


def peek_request_ids(frame: memoryview | bytearray) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id): readable for any API, known or not."""
    if len(frame) < _KEY_VERSION_CORRELATION.size:
        raise DecodeError("frame too short for a request header")
    return _KEY_VERSION_CORRELATION.unpack_from(frame, 0)


def decode_request_header(frame: memoryview | bytearray) -> RequestHeader:
    """Decode the header of a request whose API and version are supported."""
    api_key, api_version, correlation_id = peek_request_ids(frame)
    assert api_key in SUPPORTED_APIS
    reader = Reader(frame, _KEY_VERSION_CORRELATION.size)
    # client_id keeps the int16-length string encoding even in header v2.
    client_id = reader.nullable_string(compact=False)
    if request_header_version(api_key, api_version) == 2:
        reader.skip_tagged_fields()
    return RequestHeader(api_key, api_version, correlation_id, client_id, reader.pos)


def encode_request_header(api_key: int, api_version: int, correlation_id: int, client_id: str | None) -> bytes:
    writer = Writer()
    writer.int16(api_key)
    writer.int16(api_version)
    writer.int32(correlation_id)
    writer.string(client_id, compact=False)
    if request_header_version(api_key, api_version) == 2:
        writer.empty_tagged_fields()
    return bytes(writer.buf)


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    assert header_version in (0, 1)
    head = correlation_id.to_bytes(4, "big", signed=True)
    return head + b"\x00" if header_version == 1 else head


def decode_response_header(frame: memoryview | bytearray, header_version: int) -> tuple[int, int]:
    """(correlation_id, body_offset)."""
    reader = Reader(frame)
    correlation_id = reader.int32()
    if header_version == 1:
        reader.skip_tagged_fields()
    return correlation_id, reader.pos
