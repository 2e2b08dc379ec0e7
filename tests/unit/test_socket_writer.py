import asyncio
import os
import socket
from dataclasses import dataclass

import pytest

from replog.server.writer import SliceTruncatedError, SocketWriter


@dataclass(frozen=True)
class FileSliceStub:
    file: object
    position: int
    length: int


async def drain(reader_sock: socket.socket, expected: int) -> bytes:
    loop = asyncio.get_running_loop()
    chunks, total = [], 0
    while total < expected:
        chunk = await loop.sock_recv(reader_sock, 1 << 16)
        assert chunk, "writer side closed early"
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("use_sendfile", [True, False])
async def test_parts_and_file_slices_arrive_in_order_through_partial_writes(tmp_path, use_sendfile):
    data = os.urandom(3 << 20)
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    left, right = socket.socketpair()
    left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # force many partial writes
    right.setblocking(False)
    errors = []
    with open(path, "rb", buffering=0) as f:
        writer = SocketWriter(asyncio.get_running_loop(), left.fileno(), use_sendfile=use_sendfile,
                              on_error=errors.append, on_drained=lambda: None)
        parts = [b"head", b"", FileSliceStub(f, 100, 2 << 20), b"mid", FileSliceStub(f, 0, 0), b"tail" * 1000]
        writer.write(parts)
        expected = b"head" + data[100 : 100 + (2 << 20)] + b"mid" + b"tail" * 1000
        received = await asyncio.wait_for(drain(right, len(expected)), 30)
        writer.close()
    assert received == expected
    assert errors == []
    assert writer.buffered_bytes == 0
    left.close()
    right.close()


async def test_a_slice_past_the_end_of_its_file_is_an_error(tmp_path):
    path = tmp_path / "segment.log"
    path.write_bytes(b"x" * 10)
    left, right = socket.socketpair()
    errors = []
    with open(path, "rb", buffering=0) as f:
        writer = SocketWriter(asyncio.get_running_loop(), left.fileno(), use_sendfile=True,
                              on_error=errors.append, on_drained=lambda: None)
        writer.write([FileSliceStub(f, 0, 100)])  # the segment was truncated under the slice
    assert len(errors) == 1 and isinstance(errors[0], SliceTruncatedError)
    left.close()
    right.close()
