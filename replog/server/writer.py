"""Writes responses to a socket we own the write side of: byte parts with sendmsg, log file slices with
os.sendfile (zero-copy) or, when that is switched off, pread + send (the copy path).

uvloop implements neither loop.sendfile nor add_writer on a transport's own socket, so the connection keeps
reading through its transport and writes through a dup of the socket fd; the transport never writes, so the
two paths cannot interleave. Parts go out strictly in order.

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

MAX_IOVECS = 512
COPY_CHUNK_BYTES = 1 << 20


class SliceTruncatedError(OSError):
    """The segment under a file slice shrank while it was being sent (truncation); the frame is broken."""


class SocketWriter:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock_fd: int,
        *,
        use_sendfile: bool,
        on_error: Callable[[BaseException], None],
        on_drained: Callable[[], None],
    ) -> None:
        self._loop = loop
        self._sock = socket.socket(fileno=os.dup(sock_fd))
        self._sock.setblocking(False)
        self._use_sendfile = use_sendfile
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
                sent_all = self._send_slice(head) if _is_slice(head) else self._send_bytes()
                if not sent_all:
                    self._wait_writable()
                    return
        except OSError as e:
            self.close()
            self._on_error(e)
            return
        self._on_drained()

    def _send_bytes(self) -> bool:
        """Send the leading run of byte parts with one sendmsg; True if all of them went out."""
        run = []
        slice_follows = False
        for part in self._queue:
            if _is_slice(part):
                slice_follows = True
                break
            if len(run) == MAX_IOVECS:
                break
            run.append(part)
        try:
            # A slice is never empty (write() drops empty parts), so what MSG_MORE holds back goes out with it.
            sent = self._sock.sendmsg(run, (), socket.MSG_MORE if slice_follows else 0)
        except BlockingIOError:
            return False
        self.buffered_bytes -= sent
        complete = sent == sum(len(p) for p in run)
        for _ in range(len(run)):
            head_length = len(self._queue[0])
            if sent < head_length:
                self._queue[0] = memoryview(self._queue[0])[sent:]
                break
            sent -= head_length
            self._queue.popleft()
        return complete

    def _send_slice(self, file_slice) -> bool:
        remaining = file_slice.length - self._slice_sent
        while remaining:
            position = file_slice.position + self._slice_sent
            try:
                if self._use_sendfile:
                    sent = os.sendfile(self._sock.fileno(), file_slice.file.fileno(), position, remaining)
                else:
                    chunk = os.pread(file_slice.file.fileno(), min(remaining, COPY_CHUNK_BYTES), position)
                    sent = self._sock.send(chunk) if chunk else 0
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
