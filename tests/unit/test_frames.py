import pytest

from replog.protocol import frames
from replog.protocol.frames import FrameDecoder, FrameError, ReceiveBudget, size_prefix, unfilled_bytearray


def framed(*payloads: bytes) -> bytes:
    return b"".join(size_prefix(len(p)) + p for p in payloads)


PAYLOADS = [b"a", b"", b"hello world", bytes(range(256)) * 300]


def collect(decoder: FrameDecoder) -> list[bytes]:
    frames = []
    while (frame := decoder.next_frame()) is not None:
        frames.append(bytes(frame))
    return frames


def test_frames_fed_whole():
    decoder = FrameDecoder(1 << 20, staging_bytes=1024)
    decoder.feed(framed(*PAYLOADS))
    assert collect(decoder) == PAYLOADS


def test_frames_fed_byte_by_byte():
    decoder = FrameDecoder(1 << 20, staging_bytes=1024)
    data = framed(*PAYLOADS)
    frames = []
    for i in range(len(data)):
        decoder.feed(data[i : i + 1])
        frames += collect(decoder)
    assert frames == PAYLOADS


def test_trailing_partial_frame_waits_for_more():
    decoder = FrameDecoder(1 << 20)
    data = framed(b"first", b"second")
    decoder.feed(data[:-3])
    assert collect(decoder) == [b"first"]
    decoder.feed(data[-3:])
    assert collect(decoder) == [b"second"]


def test_large_frame_is_received_into_its_own_buffer():
    decoder = FrameDecoder(1 << 20, staging_bytes=64)
    payload = b"x" * 5000
    decoder.feed(framed(payload)[:100])
    target = decoder.get_buffer()
    # The socket fills the frame's own buffer directly. It was sized when the frame left staging: the 60 body
    # bytes staging held, plus one staging buffer's worth; 96 body bytes are in it now.
    assert len(target) == (60 + 64) - 96
    decoder.feed(framed(payload)[100:])
    assert collect(decoder) == [payload]


def test_frames_are_writable_bytearrays():
    decoder = FrameDecoder(100)
    decoder.feed(framed(b"abc"))
    frame = decoder.next_frame()
    assert isinstance(frame, bytearray)


@pytest.mark.parametrize("size", [-1, -(2**31), 101, 2**31 - 1])
def test_bad_sizes_rejected_before_allocation(size):
    decoder = FrameDecoder(100)
    with pytest.raises(FrameError):
        decoder.feed(size.to_bytes(4, "big", signed=True))


def test_size_at_limit_accepted():
    decoder = FrameDecoder(100)
    decoder.feed(framed(b"z" * 100))
    assert collect(decoder) == [b"z" * 100]


def test_a_client_decoder_receives_a_large_frame_into_one_buffer_of_its_full_size():
    decoder = FrameDecoder(1 << 20, staging_bytes=64, grow_large_frames=False)
    payload = b"y" * 5000
    decoder.feed(framed(payload)[:100])
    # Sized from the prefix at once: the rest of the frame goes straight in, with no copy on the way.
    assert len(decoder.get_buffer()) == 5000 - 96
    decoder.feed(framed(payload)[100:])
    assert collect(decoder) == [payload]


def receive_in_reads(decoder: FrameDecoder, data: bytes, read_bytes: int) -> tuple[int, set[int]]:
    """Feed `data` as a socket delivering up to read_bytes per read would, into get_buffer()'s memory; the
    number of reads and the ids of the buffers they landed in."""
    reads, buffers, view = 0, set(), memoryview(data)
    while view:
        target = decoder.get_buffer()
        n = min(len(target), len(view), read_bytes)
        target[:n] = view[:n]
        buffers.add(id(target.obj))
        decoder.buffer_updated(n)
        view = view[n:]
        reads += 1
    return reads, buffers


def test_a_large_frame_within_the_budget_is_received_into_one_buffer_and_gives_its_share_back():
    budget = ReceiveBudget(10_000)
    decoder = FrameDecoder(1 << 20, staging_bytes=64, budget=budget)
    payload = bytes(range(256)) * 20
    decoder.feed(framed(payload)[:100])
    assert budget.reserved == len(payload)
    assert len(decoder.get_buffer()) == len(payload) - 96  # sized from the prefix: no growth, no copy
    reads, buffers = receive_in_reads(decoder, framed(payload)[100:], read_bytes=1000)
    assert (reads, len(buffers)) == (6, 1)  # the 5,024 bytes left, 1,000 a read, all into the frame
    assert collect(decoder) == [payload]
    assert budget.reserved == 0


def test_a_large_frame_past_the_budget_grows_with_its_bytes():
    budget = ReceiveBudget(10_000)
    assert budget.try_reserve(6_000)  # another connection's frame
    decoder = FrameDecoder(1 << 20, staging_bytes=64, budget=budget)
    payload = b"z" * 5000
    decoder.feed(framed(payload)[:100])
    assert budget.reserved == 6_000
    assert len(decoder.get_buffer()) == (60 + 64) - 96  # what has arrived plus a staging buffer's worth
    reads, buffers = receive_in_reads(decoder, framed(payload)[100:], read_bytes=1000)
    assert len(buffers) > 1 and reads > 6
    assert collect(decoder) == [payload]
    assert budget.reserved == 6_000


def test_closing_a_decoder_mid_frame_gives_its_share_of_the_budget_back():
    budget = ReceiveBudget(1 << 20)
    decoder = FrameDecoder(1 << 20, staging_bytes=64, budget=budget)
    decoder.feed(size_prefix(500_000) + b"x" * 100)
    assert budget.reserved == 500_000
    decoder.close()
    assert budget.reserved == 0


def test_an_unfilled_bytearray_is_an_ordinary_bytearray_of_the_size_asked():
    buffer = unfilled_bytearray(1 << 20)
    assert type(buffer) is bytearray and len(buffer) == 1 << 20
    buffer[:3] = b"abc"
    del buffer[3:]
    assert buffer == b"abc"
    assert unfilled_bytearray(0) == bytearray()


@pytest.mark.parametrize("grow_large_frames", [False, True])
def test_large_frames_are_allocated_unzeroed_and_come_out_exactly_as_sent(monkeypatch, grow_large_frames):
    """A frame's buffer may hold anything when allocated (here 0xAA everywhere): the decoder must hand out
    only bytes the socket wrote, whether the frame was allocated whole or grew with its bytes."""
    allocated = []

    def garbage_filled(size: int) -> bytearray:
        allocated.append(bytearray(b"\xaa" * size))
        return allocated[-1]

    monkeypatch.setattr(frames, "unfilled_bytearray", garbage_filled)
    decoder = FrameDecoder(1 << 20, staging_bytes=64, grow_large_frames=grow_large_frames)
    payloads = [bytes(5000), bytes(range(256)) * 40, b"small", bytes(70)]
    receive_in_reads(decoder, framed(*payloads), read_bytes=777)
    out = []
    while (frame := decoder.next_frame()) is not None:
        out.append(frame)
    assert [bytes(frame) for frame in out] == payloads
    # Each large frame is one of the unzeroed buffers: allocated whole from its prefix, or its last growth.
    large = [frame for frame in out if len(frame) > 64]
    assert len(large) == 3 and all(any(frame is buffer for buffer in allocated) for frame in large)
    assert len(allocated) == 3 if not grow_large_frames else len(allocated) > 3
