import pytest

from replog.protocol.frames import FrameDecoder, FrameError, size_prefix


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
