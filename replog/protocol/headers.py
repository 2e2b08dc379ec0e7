"""Request header v1/v2 decoding and response header v0/v1 encoding."""

import struct
from dataclasses import dataclass

from .apis import SUPPORTED_APIS, request_header_version
from .primitives import DecodeError, Reader, Writer

_KEY_VERSION_CORRELATION = struct.Struct(">hhi")
_FIXED_HEADER = struct.Struct(">hhih")  # api key, api version, correlation id, client_id length


@dataclass(slots=True)  # not frozen: a frozen dataclass sets each field through object.__setattr__, per request
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
    """Decode the header of a request whose API and version are supported.

    Every request passes here, so the usual header is read with one struct call: the fixed fields, the
    client_id (which keeps the int16-length string encoding even in header v2) and, in v2, an empty tagged
    field section (one zero byte). Anything else takes the general Reader."""
    if len(frame) < _FIXED_HEADER.size:
        raise DecodeError("frame too short for a request header")
    api_key, api_version, correlation_id, client_id_length = _FIXED_HEADER.unpack_from(frame, 0)
    assert api_key in SUPPORTED_APIS
    position = _FIXED_HEADER.size
    if client_id_length >= 0:
        end = position + client_id_length
        if end > len(frame):
            raise DecodeError(f"need {client_id_length} bytes at {position}, have {len(frame) - position}")
        try:
            client_id = str(frame[position:end], "utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError("invalid UTF-8 in a string") from e
        position = end
    elif client_id_length == -1:
        client_id = None
    else:
        raise DecodeError(f"negative length {client_id_length}")
    if request_header_version(api_key, api_version) == 2:
        if position < len(frame) and frame[position] == 0:
            position += 1  # no tagged fields
        else:
            reader = Reader(frame, position)
            reader.skip_tagged_fields()
            position = reader.pos
    return RequestHeader(api_key, api_version, correlation_id, client_id, position)


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
