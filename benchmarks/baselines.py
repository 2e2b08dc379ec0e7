"""Same-run machine ceilings the broker figures are divided by: throughputs in bytes per second, and the
round-trip times of a small message over loopback TCP.

The receiving end of every socket baseline is a separate process. For throughput it discards what it reads
(as a consumer on another vCPU would) and answers with one byte once the sender has shut down its side, so
the time covers delivery, not just handing bytes to the kernel; for round trips it echoes what it reads.
"""

import multiprocessing
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path

from .harness import MiB, Result, repeat

CHUNK = MiB
SYNC_EVERY = 16 * MiB


def _discard_forever(listener: socket.socket) -> None:
    buffer = bytearray(CHUNK)
    while True:
        connection, _ = listener.accept()
        with connection:
            while connection.recv_into(buffer):
                pass
            connection.sendall(b"!")


def _echo_forever(listener: socket.socket) -> None:
    buffer = bytearray(CHUNK)
    while True:
        connection, _ = listener.accept()
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with connection:
            while n := connection.recv_into(buffer):
                connection.sendall(buffer[:n])


def discard_server():
    """A child process accepting connections on 127.0.0.1 and discarding their bytes; yields its address."""
    return _child_server(_discard_forever)


def echo_server():
    """A child process accepting connections on 127.0.0.1 and sending back what it reads; yields its address."""
    return _child_server(_echo_forever)


@contextmanager
def _child_server(serve):
    listener = socket.create_server(("127.0.0.1", 0))
    child = multiprocessing.get_context("fork").Process(target=serve, args=(listener,), daemon=True)
    child.start()
    try:
        yield listener.getsockname()
    finally:
        child.terminate()
        child.join()
        listener.close()


def _timed_send(address, send) -> float:
    """Bytes per second for `send(sock)` (which returns bytes sent), until the receiver has read them all."""
    with socket.create_connection(address) as sock:
        started = time.perf_counter()
        sent = send(sock)
        sock.shutdown(socket.SHUT_WR)
        sock.recv(1)
        return sent / (time.perf_counter() - started)


def loopback_tcp(address, total: int) -> float:
    chunk = os.urandom(CHUNK)

    def send(sock: socket.socket) -> int:
        for _ in range(total // CHUNK):
            sock.sendall(chunk)
        return total // CHUNK * CHUNK

    return _timed_send(address, send)


def loopback_round_trips(address, message_bytes: int, count: int) -> list[int]:
    """Nanoseconds for each of `count` send-a-message, read-it-back exchanges with an echo server."""
    message = os.urandom(message_bytes)
    buffer = bytearray(message_bytes)
    view = memoryview(buffer)
    times = []
    with socket.create_connection(address) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(count):
            started = time.perf_counter_ns()
            sock.sendall(message)
            got = 0
            while got < message_bytes:
                if not (n := sock.recv_into(view[got:])):
                    raise ConnectionError("echo server closed the connection")
                got += n
            times.append(time.perf_counter_ns() - started)
    return times


def sendfile_to_loopback(address, path: Path) -> float:
    def send(sock: socket.socket) -> int:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            offset = 0
            while offset < size:
                offset += os.sendfile(sock.fileno(), f.fileno(), offset, size - offset)
            return size

    return _timed_send(address, send)


def read_send_to_loopback(address, path: Path) -> float:
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)

    def send(sock: socket.socket) -> int:
        sent = 0
        with open(path, "rb", buffering=0) as f:
            while n := f.readinto(buffer):
                sock.sendall(view[:n])
                sent += n
        return sent

    return _timed_send(address, send)


def file_append(directory: Path, total: int, *, fdatasync: bool) -> float:
    """1 MiB writes to a fresh file; with fdatasync, one every 16 MiB and one at the end."""
    chunk = os.urandom(CHUNK)
    path = directory / "append-baseline.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND)
    try:
        started = time.perf_counter()
        for written in range(CHUNK, total + 1, CHUNK):
            os.write(fd, chunk)
            if fdatasync and written % SYNC_EVERY == 0:
                os.fdatasync(fd)
        if fdatasync:
            os.fdatasync(fd)
        return total / (time.perf_counter() - started)
    finally:
        os.close(fd)
        path.unlink()


def page_cached_file(directory: Path, size: int) -> Path:
    """A file of `size` random bytes, read once so it is in the page cache."""
    path = directory / "sendfile-baseline.bin"
    with open(path, "wb") as f:
        for _ in range(size // CHUNK):
            f.write(os.urandom(CHUNK))
    warm(path)
    return path


def warm(path: Path) -> None:
    with open(path, "rb", buffering=0) as f:
        buffer = bytearray(CHUNK)
        while f.readinto(buffer):
            pass


NAME = "baselines"


def run(quick: bool, workdir: Path) -> list[Result]:
    total = (64 if quick else 1024) * MiB
    warmup, repeats = (1, 3) if quick else (1, 5)
    path = page_cached_file(workdir, total)
    try:
        with discard_server() as address:
            tcp = repeat(lambda: loopback_tcp(address, total), warmup=warmup, repeats=repeats)
            sendfile = repeat(lambda: sendfile_to_loopback(address, path), warmup=warmup, repeats=repeats)
            read_send = repeat(lambda: read_send_to_loopback(address, path), warmup=warmup, repeats=repeats)
    finally:
        path.unlink()
    append = repeat(lambda: file_append(workdir, total, fdatasync=False), warmup=warmup, repeats=repeats)
    synced = repeat(lambda: file_append(workdir, total, fdatasync=True), warmup=warmup, repeats=repeats)
    return [
        Result(NAME, "loopback TCP, 1 MiB writes", "B/s", tcp, "itself", tcp.median),
        Result(NAME, "read()+send() of a cached file", "B/s", read_send, "loopback TCP", tcp.median),
        Result(NAME, "os.sendfile of a cached file", "B/s", sendfile, "read()+send()", read_send.median),
        Result(NAME, "file append, 1 MiB writes", "B/s", append, "itself", append.median),
        Result(NAME, "file append + fdatasync/16 MiB", "B/s", synced, "file append", append.median),
    ]
