import asyncio
import os
import socket
from dataclasses import dataclass

import pytest

from replog.server.writer import GATHER_SLICE_BYTES, SliceTruncatedError, SocketWriter


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


TCP_INFO_SEGS_OUT = slice(136, 140)  # struct tcp_info's tcpi_segs_out (Linux 4.2+), a u32


def segments_sent(sock: socket.socket) -> int:
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    return int.from_bytes(info[TCP_INFO_SEGS_OUT], "little")


@pytest.mark.parametrize("gather_slice_bytes", [GATHER_SLICE_BYTES, 0])  # the slice gathered, or sendfile'd
async def test_a_fetch_responses_header_leaves_in_the_same_segment_as_its_records(tmp_path, gather_slice_bytes):
    """The server's sockets are TCP_NODELAY: without MSG_MORE the header bytes before a file slice would go
    out as a segment of their own, and wake the follower for them alone."""
    path = tmp_path / "segment.log"
    path.write_bytes(os.urandom(4096))
    listener = socket.create_server(("127.0.0.1", 0))
    left = socket.create_connection(listener.getsockname())
    right, _ = listener.accept()
    left.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    right.setblocking(False)
    errors = []
    with open(path, "rb", buffering=0) as f:
        writer = SocketWriter(asyncio.get_running_loop(), left.fileno(), use_sendfile=True,
                              on_error=errors.append, on_drained=lambda: None,
                              gather_slice_bytes=gather_slice_bytes)
        before = segments_sent(left)
        writer.write([b"size", b"response header", FileSliceStub(f, 0, 4096)])
        received = await asyncio.wait_for(drain(right, 4 + 15 + 4096), 30)
        writer.close()
    assert received == b"sizeresponse header" + path.read_bytes()
    assert segments_sent(left) - before == 1
    assert errors == []
    for sock in (left, right, listener):
        sock.close()
