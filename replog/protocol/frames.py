"""Sans-IO framing of the Kafka wire protocol: a 4-byte big-endian size, then that many bytes.

The decoder follows asyncio's BufferedProtocol shape (get_buffer / buffer_updated) so a connection can
receive straight into memory the decoder owns: small frames are cut out of a staging buffer, and a large
frame gets its own bytearray, which the socket fills directly. On a server, facing untrusted peers, that
buffer grows (fourfold) as the bytes arrive rather than being sized from the frame's size prefix up front:
a peer that sends a 4-byte prefix claiming socket.request.max.bytes and then nothing holds only a staging
buffer's worth of memory, not the limit's (Kafka allocates the whole frame on reading the prefix;
queued.max.request.bytes bounds that). A client reads responses to its own requests, sized by what it
asked for, so it allocates each large frame whole: growing costs a copy of the bytes received so far at
every step, which on replication's multi-megabyte fetch responses was a third more CPU per GiB.
A server may also hand its decoders a shared ReceiveBudget: a large frame is then allocated whole as its
prefix arrives while the budget has room, and grows as above once it has none. That is KIP-72's bound
(queued.max.request.bytes) on the memory incoming requests hold before they have arrived, and it spares a
1 MB produce request two buffer copies, 0.7 MB of zeroed allocations and half of its socket reads.
Frames come out as bytearrays because the broker stamps offsets into produce requests in place.
A large frame's buffer is allocated without being zeroed first (unfilled_bytearray): the socket writes every
byte of it before the frame is handed out, and clearing 1 MB that is about to be overwritten cost ~32 us per
frame, ~0.03 CPU-s per GiB received (docs/profiles/rf3-throughput.md, "Session 14").
"""

import ctypes
from collections import deque

SIZE_PREFIX_BYTES = 4
STAGING_BYTES = 64 * 1024


def _bytearray_from_c_library():
    """CPython's PyByteArray_FromStringAndSize, which given no source string leaves the new bytearray's bytes
    as the allocator returned them (as PyBytes_FromStringAndSize documents for bytes); None elsewhere."""
    try:
        function = ctypes.pythonapi.PyByteArray_FromStringAndSize
    except AttributeError:
        return None
    function.argtypes = [ctypes.c_char_p, ctypes.c_ssize_t]
    function.restype = ctypes.py_object
    return function


_PY_BYTEARRAY_FROM_STRING_AND_SIZE = _bytearray_from_c_library()


def unfilled_bytearray(size: int) -> bytearray:
    """A bytearray of `size` bytes whose content is undefined (bytearray(size) zeroes it): for a buffer every
    byte of which is written before anything reads it."""
    assert size >= 0
    if _PY_BYTEARRAY_FROM_STRING_AND_SIZE is None:
        return bytearray(size)
    return _PY_BYTEARRAY_FROM_STRING_AND_SIZE(None, size)


class FrameError(Exception):
    """The peer sent a frame that cannot be accepted; the connection must be closed."""


class ReceiveBudget:
    """Bytes that large frames allocated whole may hold, shared by a server's decoders, before their bytes
    have arrived: the pool from which a peer's size prefix can claim memory up front."""

    def __init__(self, max_bytes: int) -> None:
        assert max_bytes >= 0
        self.max_bytes = max_bytes
        self.reserved = 0

    def try_reserve(self, nbytes: int) -> bool:
        if self.reserved + nbytes > self.max_bytes:
            return False
        self.reserved += nbytes
        return True

    def release(self, nbytes: int) -> None:
        assert 0 <= nbytes <= self.reserved
        self.reserved -= nbytes


class FrameDecoder:
    def __init__(self, max_frame_bytes: int, staging_bytes: int = STAGING_BYTES, *,
                 grow_large_frames: bool = True, budget: ReceiveBudget | None = None) -> None:  # fmt: skip
        assert max_frame_bytes > 0
        assert staging_bytes >= SIZE_PREFIX_BYTES
        self.max_frame_bytes = max_frame_bytes
        self._grow_large_frames = grow_large_frames
        self._budget = budget
        self._reserved = 0  # what the large frame holds of the budget until it is complete
        self._staging = bytearray(staging_bytes)
        self._staged = 0  # bytes of the staging buffer holding unparsed data
        self._large: bytearray | None = None  # the frame being filled directly, if any; grows to _large_size
        self._large_size = 0
        self._large_filled = 0
        self._frames: deque[bytearray] = deque()

    def get_buffer(self) -> memoryview:
        """Where the next bytes from the socket should go."""
        if self._large is not None:
            if self._large_filled == len(self._large):
                self._grow_large()
            return memoryview(self._large)[self._large_filled :]
        return memoryview(self._staging)[self._staged :]

    def buffer_updated(self, nbytes: int) -> None:
        """Account for nbytes written into the last get_buffer(); cut out complete frames."""
        assert nbytes >= 0
        if self._large is not None:
            self._large_filled += nbytes
            assert self._large_filled <= len(self._large)
            if self._large_filled == self._large_size:
                self._frames.append(self._large)
                self._large = None
                self._release_budget()
            return
        self._staged += nbytes
        assert self._staged <= len(self._staging)
        self._parse_staging()

    def feed(self, data: bytes) -> None:
        """Copying convenience for tests and clients: push bytes through get_buffer/buffer_updated."""
        view = memoryview(data)
        while view:
            target = self.get_buffer()
            n = min(len(target), len(view))
            target[:n] = view[:n]
            view = view[n:]
            self.buffer_updated(n)

    def close(self) -> None:
        """The connection is gone: drop a frame half received and give back its share of the budget."""
        self._large = None
        self._release_budget()

    def next_frame(self) -> bytearray | None:
        return self._frames.popleft() if self._frames else None

    @property
    def queued_frames(self) -> int:
        return len(self._frames)

    def _parse_staging(self) -> None:
        staging = self._staging
        pos = 0
        while self._staged - pos >= SIZE_PREFIX_BYTES:
            size = int.from_bytes(staging[pos : pos + SIZE_PREFIX_BYTES], "big", signed=True)
            self._check_size(size)
            body_start = pos + SIZE_PREFIX_BYTES
            available = self._staged - body_start
            if available >= size:
                self._frames.append(staging[body_start : body_start + size])
                pos = body_start + size
                continue
            if size > len(staging) - SIZE_PREFIX_BYTES:
                # Too big for staging: give it its own buffer, whole if it may, else sized to what has
                # arrived so far plus a staging buffer's worth, and let the socket fill it.
                initial = size if self._whole(size) else min(size, available + len(staging))
                # Unzeroed: a frame leaves the decoder only once the socket has filled all of it.
                self._large = unfilled_bytearray(initial)
                self._large[:available] = staging[body_start : self._staged]
                self._large_size = size
                self._large_filled = available
                pos = self._staged
            break
        self._compact(pos)

    def _whole(self, size: int) -> bool:
        if not self._grow_large_frames:
            return True
        if self._budget is not None and self._budget.try_reserve(size):
            self._reserved = size
            return True
        return False

    def _release_budget(self) -> None:
        if self._reserved:
            self._budget.release(self._reserved)
            self._reserved = 0

    def _grow_large(self) -> None:
        """Quadruple the large frame's buffer (up to its size) once the bytes received have filled it: a
        1 MiB produce request costs two copies of 64 and 256 KiB, where doubling cost four."""
        assert self._large_filled == len(self._large) < self._large_size
        grown = unfilled_bytearray(min(self._large_size, 4 * len(self._large)))
        grown[: self._large_filled] = self._large
        self._large = grown

    def _check_size(self, size: int) -> None:
        if size < 0:
            raise FrameError(f"negative frame size {size}")
        if size > self.max_frame_bytes:
            raise FrameError(f"frame of {size} bytes exceeds the limit of {self.max_frame_bytes}")

    def _compact(self, consumed: int) -> None:
        if consumed == 0:
            return
        remaining = self._staged - consumed
        self._staging[:remaining] = self._staging[consumed : self._staged]
        self._staged = remaining


def size_prefix(size: int) -> bytes:
    assert 0 <= size < 2**31
    return size.to_bytes(SIZE_PREFIX_BYTES, "big")
