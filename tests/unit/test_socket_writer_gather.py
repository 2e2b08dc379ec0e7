"""SocketWriter's gathered sends: small log slices are read and sent with the byte parts around them in one
sendmsg, large ones keep sendfile. The system calls are counted through an injected SendOps."""

import asyncio
import os
import socket
from collections import Counter
from dataclasses import dataclass

import pytest

from replog.server.writer import (
    GATHER_MAX_BYTES,
    GATHER_SLICE_BYTES,
    MAX_IOVECS,
    SendOps,
    SliceTruncatedError,
    SocketWriter,
)

from .test_socket_writer import drain


@dataclass(frozen=True)
class FileSliceStub:
    file: object
    position: int
    length: int


class CountingOps(SendOps):
    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.iovecs: list[int] = []  # buffers offered to each sendmsg
        self.offered: list[int] = []  # and their bytes

    def sendmsg(self, sock, buffers, flags):
        self.calls["sendmsg"] += 1
        self.iovecs.append(len(buffers))
        self.offered.append(sum(len(buffer) for buffer in buffers))
        return super().sendmsg(sock, buffers, flags)

    def sendfile(self, sock_fd, file_fd, position, count):
        self.calls["sendfile"] += 1
        return super().sendfile(sock_fd, file_fd, position, count)

    def pread(self, fd, size, position):
        self.calls["pread"] += 1
        return super().pread(fd, size, position)


class ShortSendOps(CountingOps):
    """Takes at most `limit` bytes a sendmsg, and refuses every other one (the socket's buffer is full)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def sendmsg(self, sock, buffers, flags):
        self.calls["sendmsg"] += 1
        if self.calls["sendmsg"] % 2 == 0:
            raise BlockingIOError
        room, cut = self.limit, []
        for buffer in buffers:
            cut.append(memoryview(buffer)[:room])
            room -= len(cut[-1])
            if not room:
                break
        return sock.sendmsg(cut, (), flags)


def fetch_answer(f, partitions: int, slice_bytes: int) -> list:
    """A fetch response's shape: a size and header, then a partition header and a slice per partition."""
    parts: list = [b"size", b"response header"]
    for index in range(partitions):
        parts.append(index.to_bytes(4, "big") + b"partition fields")
        parts.append(FileSliceStub(f, index * slice_bytes, slice_bytes))
    parts.append(b"trailer")
    return parts


def expected_bytes(parts: list, data: bytes) -> bytes:
    return b"".join(
        bytes(part) if isinstance(part, (bytes, memoryview)) else data[part.position : part.position + part.length]
        for part in parts
    )


async def send_through_writer(parts: list, data: bytes, ops: SendOps, **options) -> bytes:
    left, right = socket.socketpair()
    right.setblocking(False)
    errors: list[BaseException] = []
    writer = SocketWriter(asyncio.get_running_loop(), left.fileno(), use_sendfile=True,
                          on_error=errors.append, on_drained=lambda: None, ops=ops, **options)
    writer.write(parts)
    try:
        received = await asyncio.wait_for(drain(right, len(expected_bytes(parts, data))), 30)
    finally:
        writer.close()
        left.close()
        right.close()
    assert errors == []
    assert writer.buffered_bytes == 0
    return received


@pytest.fixture
def segment(tmp_path):
    data = os.urandom(4 << 20)
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    with open(path, "rb", buffering=0) as f:
        yield f, data


async def test_a_fetch_answer_over_333_small_slices_is_one_sendmsg_and_a_pread_per_partition(segment):
    f, data = segment
    parts = fetch_answer(f, 333, 300)  # 110 KB: within a socketpair's send buffer, so no send falls short
    ops = CountingOps()
    received = await send_through_writer(parts, data, ops)
    assert received == expected_bytes(parts, data)
    # 2 + 333 * 2 + 1 = 669 buffers: two sendmsgs of at most MAX_IOVECS, no sendfile.
    assert ops.calls == Counter({"pread": 333, "sendmsg": 2})
    assert ops.iovecs == [MAX_IOVECS, 669 - MAX_IOVECS]


async def test_the_gathered_answer_is_byte_for_byte_the_sendfile_paths(segment):
    f, data = segment
    parts = fetch_answer(f, 300, 3000)
    gathered_ops, sendfile_ops = CountingOps(), CountingOps()
    gathered = await send_through_writer(parts, data, gathered_ops)
    one_sendfile_a_slice = await send_through_writer(parts, data, sendfile_ops, gather_slice_bytes=0)
    assert gathered == one_sendfile_a_slice == expected_bytes(parts, data)
    assert gathered_ops.calls["sendfile"] == 0
    assert sendfile_ops.calls["sendfile"] == 300 and sendfile_ops.calls["pread"] == 0


async def test_slices_above_the_gather_size_keep_sendfile_and_the_bytes_around_them_are_gathered(segment):
    f, data = segment
    large = GATHER_SLICE_BYTES + 1
    parts = [b"head", FileSliceStub(f, 0, 100), b"mid", FileSliceStub(f, 1000, large), b"a", b"b",
             FileSliceStub(f, 7, GATHER_SLICE_BYTES), b"tail"]
    ops = CountingOps()
    received = await send_through_writer(parts, data, ops)
    assert received == expected_bytes(parts, data)
    assert ops.calls["sendfile"] == 1  # the large slice alone, without a copy
    assert ops.calls["pread"] == 2
    assert ops.iovecs == [3, 4]  # head, slice, mid | a, b, slice, tail


async def test_a_run_reads_at_most_its_byte_budget_before_sending(segment):
    f, data = segment
    slice_bytes = GATHER_MAX_BYTES // 16
    assert slice_bytes <= GATHER_SLICE_BYTES
    parts = [FileSliceStub(f, index * slice_bytes, slice_bytes) for index in range(40)]
    ops = CountingOps()
    received = await send_through_writer(parts, data, ops)
    assert received == expected_bytes(parts, data)
    assert ops.iovecs[0] == 16 and ops.offered[0] == GATHER_MAX_BYTES
    assert max(ops.offered) <= GATHER_MAX_BYTES  # what a short send leaves is offered again, never more
    assert ops.calls["pread"] == 40


async def test_short_and_refused_sends_resume_where_they_stopped_and_read_each_slice_once(segment):
    f, data = segment
    parts = fetch_answer(f, 200, 1500)
    ops = ShortSendOps(limit=7001)  # cuts inside headers and inside gathered slices alike
    received = await send_through_writer(parts, data, ops)
    assert received == expected_bytes(parts, data)
    assert ops.calls["pread"] == 200
    assert ops.calls["sendmsg"] > 2 * (len(received) // 7001)


async def test_a_small_slice_past_the_end_of_its_file_is_an_error(tmp_path):
    path = tmp_path / "segment.log"
    path.write_bytes(b"x" * 10)
    left, right = socket.socketpair()
    errors: list[BaseException] = []
    with open(path, "rb", buffering=0) as f:
        writer = SocketWriter(asyncio.get_running_loop(), left.fileno(), use_sendfile=True,
                              on_error=errors.append, on_drained=lambda: None)
        writer.write([b"header", FileSliceStub(f, 0, 100)])  # the segment was truncated under the slice
    assert len(errors) == 1 and isinstance(errors[0], SliceTruncatedError)
    left.close()
    right.close()
