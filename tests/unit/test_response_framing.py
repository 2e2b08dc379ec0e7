"""frame_response: the size prefix and response header go out joined to the body's first bytes part; record
slices stay parts of their own (the writer sends large ones with sendfile). The bytes on the wire are the same."""

import io
from dataclasses import dataclass

import pytest

from replog.protocol.fetch import part_length
from replog.server.dispatch import frame_response


@dataclass(frozen=True)
class FileSlice:
    """A record slice as the fetch path hands it over (protocol.fetch.SliceLike)."""

    file: io.BytesIO
    position: int
    length: int


def wire_bytes(parts) -> bytes:
    """What a writer sends for `parts`: bytes as they are, a slice's bytes read from its file."""
    out = b""
    for part in parts:
        if isinstance(part, (bytes, bytearray, memoryview)):
            out += bytes(part)
        else:
            part.file.seek(part.position)
            out += part.file.read(part.length)
    return out


def expected_wire(correlation_id: int, header_version: int, body_bytes: bytes) -> bytes:
    head = correlation_id.to_bytes(4, "big", signed=True) + (b"\x00" if header_version == 1 else b"")
    return (len(head) + len(body_bytes)).to_bytes(4, "big") + head + body_bytes


@pytest.mark.parametrize("header_version", [0, 1])
def test_an_answer_of_one_part_is_framed_as_one_buffer(header_version):
    body = b"\x00\x00\x00\x01produce answer"
    parts = frame_response(-7, header_version, [body])
    assert len(parts) == 1
    assert parts[0] == expected_wire(-7, header_version, body)


def test_a_fetch_answer_keeps_its_record_slices_as_parts_and_joins_the_leading_bytes():
    records = b"r" * 5000
    file = io.BytesIO(b"x" * 100 + records)
    record_slice = FileSlice(file, 100, len(records))
    body = [b"fetch header", record_slice, b"tail"]
    parts = frame_response(3, 1, body)
    assert len(parts) == 3 and parts[1] is record_slice
    assert sum(part_length(p) for p in parts) - 4 == int.from_bytes(parts[0][:4], "big")
    assert wire_bytes(parts) == expected_wire(3, 1, b"fetch header" + records + b"tail")


def test_a_body_that_starts_with_a_slice_or_is_empty_gets_a_part_of_its_own_for_the_header():
    file = io.BytesIO(b"abcdef")
    parts = frame_response(1, 0, [FileSlice(file, 1, 3)])
    assert len(parts) == 2 and wire_bytes(parts) == expected_wire(1, 0, b"bcd")
    assert frame_response(2, 0, []) == [expected_wire(2, 0, b"")]
