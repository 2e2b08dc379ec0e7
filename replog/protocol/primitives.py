"""Hand-written readers and writers of Kafka's primitive types, for the hot-path codecs.

The Reader works over a memoryview and returns memoryview slices for byte fields, so record data is never
copied. Every length read off the wire is checked against the bytes that remain before it is used.
"""

import struct
import uuid

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")

MAX_VARINT_BYTES = 5
MAX_TAGGED_FIELDS = 1024


class DecodeError(Exception):
    """The bytes do not form a valid message; the broker answers by closing the connection."""


class Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: memoryview | bytes | bytearray, pos: int = 0) -> None:
        self.buf = memoryview(buf)
        self.pos = pos

    @property
    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def _need(self, n: int) -> int:
        if n < 0 or self.pos + n > len(self.buf):
            raise DecodeError(f"need {n} bytes at {self.pos}, have {self.remaining}")
        start = self.pos
        self.pos += n
        return start

    def int8(self) -> int:
        return _I8.unpack_from(self.buf, self._need(1))[0]

    def int16(self) -> int:
        return _I16.unpack_from(self.buf, self._need(2))[0]

    def int32(self) -> int:
        return _I32.unpack_from(self.buf, self._need(4))[0]

    def int64(self) -> int:
        return _I64.unpack_from(self.buf, self._need(8))[0]

    def boolean(self) -> bool:
        return self.int8() != 0

    def uuid(self) -> uuid.UUID:
        start = self._need(16)
        return uuid.UUID(bytes=bytes(self.buf[start : start + 16]))

    def uvarint(self) -> int:
        value = 0
        for i in range(MAX_VARINT_BYTES):
            byte = self.buf[self._need(1)]
            value |= (byte & 0x7F) << (7 * i)
            if not byte & 0x80:
                return value
        raise DecodeError("unsigned varint longer than 5 bytes")

    def raw(self, n: int) -> memoryview:
        start = self._need(n)
        return self.buf[start : start + n]

    def string(self, *, compact: bool) -> str:
        value = self.nullable_string(compact=compact)
        if value is None:
            raise DecodeError("null where a string is required")
        return value

    def nullable_string(self, *, compact: bool) -> str | None:
        data = self.nullable_bytes(compact=compact, int16_length=not compact)
        if data is None:
            return None
        try:
            return str(data, "utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError("invalid UTF-8 in a string") from e

    def nullable_bytes(self, *, compact: bool, int16_length: bool = False) -> memoryview | None:
        if compact:
            n = self.uvarint() - 1
        else:
            n = self.int16() if int16_length else self.int32()
        if n == -1:
            return None
        if n < -1:
            raise DecodeError(f"negative length {n}")
        return self.raw(n)

    def array_length(self, *, compact: bool) -> int:
        """An array's element count, bounded by the bytes left (each element takes at least one)."""
        n = self.uvarint() - 1 if compact else self.int32()
        if n < -1:
            raise DecodeError(f"negative array length {n}")
        if n > self.remaining:
            raise DecodeError(f"array of {n} elements cannot fit in {self.remaining} bytes")
        return n

    def skip_tagged_fields(self) -> None:
        count = self.uvarint()
        if count > MAX_TAGGED_FIELDS:
            raise DecodeError(f"{count} tagged fields")
        for _ in range(count):
            self.uvarint()  # tag
            self.raw(self.uvarint())

    def tagged_fields(self) -> dict[int, memoryview]:
        count = self.uvarint()
        if count > MAX_TAGGED_FIELDS:
            raise DecodeError(f"{count} tagged fields")
        fields = {}
        for _ in range(count):
            tag = self.uvarint()
            fields[tag] = self.raw(self.uvarint())
        return fields


def uvarint_bytes(value: int) -> bytes:
    assert value >= 0
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class Writer:
    """Appends encoded primitives to a bytearray; large byte fields can be kept out of line (see parts)."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def int8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def int16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def boolean(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def uuid(self, v: uuid.UUID) -> None:
        self.buf += v.bytes

    def uvarint(self, v: int) -> None:
        self.buf += uvarint_bytes(v)

    def string(self, v: str | None, *, compact: bool) -> None:
        data = None if v is None else v.encode()
        if compact:
            self.uvarint(0 if data is None else len(data) + 1)
        else:
            self.int16(-1 if data is None else len(data))
        if data:
            self.buf += data

    def bytes_length(self, n: int | None, *, compact: bool) -> None:
        """The length prefix of a bytes field whose content is written separately (or None for null)."""
        if compact:
            self.uvarint(0 if n is None else n + 1)
        else:
            self.int32(-1 if n is None else n)

    def array_length(self, n: int, *, compact: bool) -> None:
        if compact:
            self.uvarint(n + 1)
        else:
            self.int32(n)

    def empty_tagged_fields(self) -> None:
        self.buf.append(0)

    def tagged_fields(self, fields: dict[int, bytes]) -> None:
        self.uvarint(len(fields))
        for tag in sorted(fields):
            self.uvarint(tag)
            self.uvarint(len(fields[tag]))
            self.buf += fields[tag]
