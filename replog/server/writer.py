"""Writes responses to a socket we own the write side of: byte parts with sendmsg, log file slices with
os.sendfile (zero-copy) or, when that is switched off, pread + send (the copy path).

uvloop implements neither loop.sendfile nor add_writer on a transport's own socket, so the connection keeps
reading through its transport and writes through a dup of the socket fd; the transport never writes, so the
two paths cannot interleave. Parts go out strictly in order.

A slice of at most GATHER_SLICE_BYTES is read (pread) when its turn comes and sent with the byte parts
around it in one sendmsg of up to MAX_IOVECS buffers: a follower's fetch answer over hundreds of partitions
with a batch or two each is then one sendmsg plus a pread per partition, where a sendmsg (the partition's
header) and a sendfile each would take two trips through the TCP stack per partition. Larger slices keep
sendfile, so consumers and catching-up followers still read the log without a copy.

Byte parts followed by a file slice (a fetch response's headers, then its records) are sent with MSG_MORE,
so the kernel holds them back and puts them in the same segment as the slice's first bytes: with
TCP_NODELAY they would otherwise leave as a segment of their own, and wake the reader for a few dozen bytes
once per fetch response.
"""

import asyncio
import collections
import os
import socket
from collections.abc import Callable

from replog.protocol.fetch import RecordsPart

MAX_IOVECS = 512  # Linux's IOV_MAX is 1024; half keeps a run's list and its copies small
COPY_CHUNK_BYTES = 1 << 20
# Slices up to this size are copied into the sendmsg run (a few record batches of a partition). Measured on
# loopback TCP (docs/profiles/partition-scaling.md), the sending thread's CPU per slice, pread + a share of
# the gathered sendmsg against a header sendmsg + a sendfile: 1.8 against 3.3 us at 8 KiB, 2.7 against 4.3
# at 16 KiB, 4.1 against 4.4 at 24 KiB, even at about 32 KiB; bigger slices (a consumer's, a catching-up
# follower's) keep sendfile, without the copy.
GATHER_SLICE_BYTES = 24 << 10
GATHER_MAX_BYTES = 256 << 10  # bytes in one run at most: bounds the copies a connection holds at once


class SliceTruncatedError(OSError):
    """The segment under a file slice shrank while it was being sent (truncation); the frame is broken."""


class SendOps:
    """The system calls the writer makes. Tests pass a subclass to count them, or to cut sends short."""

    def sendmsg(self, sock: socket.socket, buffers: list, flags: int) -> int:
        return sock.sendmsg(buffers, (), flags)

    def sendfile(self, sock_fd: int, file_fd: int, position: int, count: int) -> int:
        return os.sendfile(sock_fd, file_fd, position, count)

    def pread(self, fd: int, size: int, position: int) -> bytes:
        return os.pread(fd, size, position)

    def send(self, sock: socket.socket, data: bytes) -> int:
        return sock.send(data)


OS_SEND_OPS = SendOps()


class SocketWriter:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock_fd: int,
        *,
        use_sendfile: bool,
        on_error: Callable[[BaseException], None],
        on_drained: Callable[[], None],
        gather_slice_bytes: int = GATHER_SLICE_BYTES,
        ops: SendOps = OS_SEND_OPS,
    ) -> None:
        self._loop = loop
        self._sock = socket.socket(fileno=os.dup(sock_fd))
        self._sock.setblocking(False)
        self._use_sendfile = use_sendfile
        self._gather_slice_bytes = gather_slice_bytes
        self._ops = ops
        self._on_error = on_error
        self._on_drained = on_drained
        self._queue: collections.deque[RecordsPart] = collections.deque()
        self._slice_sent = 0  # bytes of the head slice already sent
        self._waiting_writable = False
        self._closed = False
        self.buffered_bytes = 0

    def write(self, parts: list[RecordsPart]) -> None:
        if self._closed:
            return
        for part in parts:
            length = _length(part)
            if length:  # an empty part would never be consumed by a send
                self._queue.append(part)
                self.buffered_bytes += length
        if not self._waiting_writable:
            self._flush()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._waiting_writable:
            self._loop.remove_writer(self._sock.fileno())
        self._queue.clear()
        self._sock.close()

    def _flush(self) -> None:
        try:
            while self._queue:
                head = self._queue[0]
                if self._is_large_slice(head):
                    sent_all = self._send_slice(head)
                else:
                    sent_all = self._send_run()
                if not sent_all:
                    self._wait_writable()
                    return
        except OSError as e:
            self.close()
            self._on_error(e)
            return
        self._on_drained()

    def _is_large_slice(self, part: RecordsPart) -> bool:
        return _is_slice(part) and part.length > self._gather_slice_bytes

    def _send_run(self) -> bool:
        """Send the leading byte parts and small slices (read now) with one sendmsg; True if all went out.

        What a partial send leaves goes back to the head of the queue as bytes, so a slice is read once."""
        queue = self._queue
        run: list = []
        run_bytes = 0
        while queue and len(run) < MAX_IOVECS:
            part = queue[0]
            length = _length(part)
            if run and run_bytes + length > GATHER_MAX_BYTES:
                break
            if _is_slice(part):
                if length > self._gather_slice_bytes:
                    break
                part = self._read_slice(part)
            queue.popleft()
            run.append(part)
            run_bytes += length
        try:
            # Anything still queued follows at once (or when the socket drains), so MSG_MORE lets the kernel
            # fill segments across the calls; the last run of the queue pushes. No part is empty (write()).
            sent = self._ops.sendmsg(self._sock, run, socket.MSG_MORE if queue else 0)
        except BlockingIOError:
            sent = 0
        self.buffered_bytes -= sent
        if sent == run_bytes:
            return True
        for index, part in enumerate(run):  # put back what did not go out, in order
            if sent < len(part):
                unsent = [memoryview(part)[sent:], *run[index + 1:]]
                queue.extendleft(reversed(unsent))
                break
            sent -= len(part)
        return False

    def _read_slice(self, file_slice) -> bytes:
        data = self._ops.pread(file_slice.file.fileno(), file_slice.length, file_slice.position)
        if len(data) != file_slice.length:
            raise SliceTruncatedError(f"log segment ended {file_slice.length - len(data)} bytes early")
        return data

    def _send_slice(self, file_slice) -> bool:
        remaining = file_slice.length - self._slice_sent
        while remaining:
            position = file_slice.position + self._slice_sent
            try:
                if self._use_sendfile:
                    sent = self._ops.sendfile(self._sock.fileno(), file_slice.file.fileno(), position, remaining)
                else:
                    chunk = self._ops.pread(file_slice.file.fileno(), min(remaining, COPY_CHUNK_BYTES), position)
                    sent = self._ops.send(self._sock, chunk) if chunk else 0
            except BlockingIOError:
                return False
            if sent == 0:
                raise SliceTruncatedError(f"log segment ended {remaining} bytes early")
            self._slice_sent += sent
            self.buffered_bytes -= sent
            remaining -= sent
        self._queue.popleft()
        self._slice_sent = 0
        return True

    def _wait_writable(self) -> None:
        self._waiting_writable = True
        self._loop.add_writer(self._sock.fileno(), self._on_writable)

    def _on_writable(self) -> None:
        self._loop.remove_writer(self._sock.fileno())
        self._waiting_writable = False
        self._flush()


def _is_slice(part: RecordsPart) -> bool:
    return not isinstance(part, (bytes, bytearray, memoryview))


def _length(part: RecordsPart) -> int:
    return len(part) if not _is_slice(part) else part.length


class TransportWriter:
    """The writer of a TLS connection: everything goes through the transport, which encrypts it, so log file
    slices take the copy path (pread, then write), as Kafka's SslTransportLayer does without sendfile.
    buffered_bytes is the transport's backlog; the connection hears of it draining through resume_writing."""

    def __init__(self, transport: asyncio.Transport, *, on_error: Callable[[BaseException], None]) -> None:
        self._transport = transport
        self._on_error = on_error
        self._closed = False

    @property
    def buffered_bytes(self) -> int:
        return 0 if self._closed else self._transport.get_write_buffer_size()

    def write(self, parts: list[RecordsPart]) -> None:
        if self._closed:
            return
        try:
            for part in parts:
                if _is_slice(part):
                    self._write_slice(part)
                elif len(part):
                    self._transport.write(part)
        except OSError as e:
            self.close()
            self._on_error(e)

    def _write_slice(self, file_slice) -> None:
        sent = 0
        while sent < file_slice.length:
            chunk = os.pread(file_slice.file.fileno(), min(file_slice.length - sent, COPY_CHUNK_BYTES),
                             file_slice.position + sent)
            if not chunk:
                raise SliceTruncatedError(f"log segment ended {file_slice.length - sent} bytes early")
            self._transport.write(chunk)
            sent += len(chunk)

    def close(self) -> None:
        self._closed = True
