import struct

import cramjam
import pytest

from replog.protocol.compression import XERIAL_MAGIC, Compression, CompressionError, compress, decompress

PAYLOAD = b"replicated log " * 1000 + bytes(range(256))


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_round_trip(codec):
    packed = compress(codec, PAYLOAD)
    assert len(packed) < len(PAYLOAD)
    assert bytes(decompress(codec, packed)) == PAYLOAD


def test_snappy_is_raw_like_librdkafka():
    assert bytes(cramjam.snappy.decompress_raw(compress(Compression.SNAPPY, PAYLOAD))) == PAYLOAD


def _xerial(data: bytes, block: int) -> bytes:
    out = bytearray(XERIAL_MAGIC + struct.pack(">ii", 1, 1))
    for start in range(0, len(data), block):
        chunk = bytes(cramjam.snappy.compress_raw(data[start : start + block]))
        out += struct.pack(">i", len(chunk)) + chunk
    return bytes(out)


def test_xerial_snappy_decoded():
    assert bytes(decompress(Compression.SNAPPY, _xerial(PAYLOAD, 4096))) == PAYLOAD
    assert bytes(decompress(Compression.SNAPPY, _xerial(b"", 4096))) == b""


def test_xerial_truncated_chunk_rejected():
    framed = _xerial(PAYLOAD, 4096)
    with pytest.raises(CompressionError):
        decompress(Compression.SNAPPY, framed[:-5])
    with pytest.raises(CompressionError):
        decompress(Compression.SNAPPY, framed[:18])


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_garbage_raises_compression_error(codec):
    with pytest.raises(CompressionError):
        decompress(codec, b"\x00\x01garbage that is not compressed" * 3)
