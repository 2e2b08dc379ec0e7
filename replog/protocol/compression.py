"""Record batch compression codecs (attributes bits 0-2), backed by cramjam.

Only the records section of a batch is compressed; the 61-byte header never is.
Outputs are returned as memoryviews over cramjam buffers so callers can parse
them without another copy.
"""

from __future__ import annotations

import enum
import struct

import cramjam


class Compression(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class CompressionError(Exception):
    """Compressed payload could not be decoded (the batch is corrupt)."""


# Java clients (snappy-java) frame snappy in the "xerial" format: a 16-byte
# header (magic, version int32, compat int32) then [int32 length][raw chunk]*.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_CHUNK_LEN = struct.Struct(">i")
# snappy-java writes 32 KiB blocks; anything past this cannot be a sane chunk.
_XERIAL_MAX_CHUNK = 64 * 1024 * 1024


def compress(codec: Compression, data: bytes | memoryview) -> memoryview:
    assert codec != Compression.NONE
    if codec == Compression.GZIP:
        out = cramjam.gzip.compress(data)
    elif codec == Compression.SNAPPY:
        # Raw snappy, like librdkafka; every Kafka client decodes it.
        out = cramjam.snappy.compress_raw(data)
    elif codec == Compression.LZ4:
        out = cramjam.lz4.compress(data)
    elif codec == Compression.ZSTD:
        out = cramjam.zstd.compress(data)
    else:
        raise ValueError(f"unknown compression codec {codec!r}")
    return memoryview(out)


def decompress(codec: Compression, data: bytes | memoryview) -> memoryview:
    assert codec != Compression.NONE
    try:
        if codec == Compression.GZIP:
            return memoryview(cramjam.gzip.decompress(data))
        if codec == Compression.SNAPPY:
            return _decompress_snappy(memoryview(data))
        if codec == Compression.LZ4:
            return memoryview(cramjam.lz4.decompress(data))
        if codec == Compression.ZSTD:
            return memoryview(cramjam.zstd.decompress(data))
    except (cramjam.DecompressionError, ValueError) as exc:
        raise CompressionError(f"{codec.name} payload is corrupt: {exc}") from exc
    raise CompressionError(f"unknown compression codec {int(codec)}")


def _decompress_snappy(data: memoryview) -> memoryview:
    if data[: len(XERIAL_MAGIC)] == XERIAL_MAGIC:
        return _decompress_xerial(data)
    return memoryview(cramjam.snappy.decompress_raw(data))


def _decompress_xerial(data: memoryview) -> memoryview:
    if len(data) < _XERIAL_HEADER.size:
        raise CompressionError("xerial snappy header is truncated")
    chunks: list[bytes] = []
    pos = _XERIAL_HEADER.size
    while pos < len(data):
        if pos + _XERIAL_CHUNK_LEN.size > len(data):
            raise CompressionError("xerial snappy chunk length is truncated")
        (length,) = _XERIAL_CHUNK_LEN.unpack_from(data, pos)
        pos += _XERIAL_CHUNK_LEN.size
        if length < 0 or length > _XERIAL_MAX_CHUNK or pos + length > len(data):
            raise CompressionError(f"xerial snappy chunk length {length} is invalid")
        chunks.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + length])))
        pos += length
    assert pos == len(data)
    return memoryview(b"".join(chunks))
