"""Walk a kio-schema message over its bytes and check every array count before kio decodes it.

kio's native reader reserves room for an array's declared element count before it reads a single element
(8 bytes per element), so a 5-byte compact array length of 2**32 - 2 makes it ask for 34 GB and the Rust
allocator aborts the whole process; smaller counts reserve gigabytes the frame could never fill. This walker
mirrors kio's wire layout (KIP-482 compact and legacy encodings, KIP-893 nullable structs, tagged fields)
without building anything, and rejects with DecodeError a count larger than the bytes left could hold, so
what kio then reserves is bounded by the frame's size. It also rejects a null where the schema version does
not allow one, as Kafka's generated readers do ("non-nullable field ... was serialized as null"): kio would
hand a handler None for a list it iterates.

Each schema is compiled once into a plan of steps, with runs of fixed-width fields merged into one skip and
arrays of fixed-width elements skipped whole, so the walk costs a fraction of kio's own decode.
"""

import functools
import struct
import types
import typing
from dataclasses import dataclass, fields, is_dataclass

from .primitives import MAX_TAGGED_FIELDS, MAX_VARINT_BYTES, DecodeError

# Encoded size of each fixed-width kio primitive.
_FIXED_SIZES = {
    "int8": 1, "uint8": 1, "bool": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}  # fmt: skip
_LENGTH_PREFIXED = ("string", "bytes", "records")
_NULL_STRUCT_MARKER = 0xFF  # KIP-893: a nullable struct starts with int8 -1 (null) or 1 (present)

# Step kinds. A step is (kind, argument).
_SKIP = 0  # argument: bytes of fixed-width fields
_INT16_LENGTH = 1  # legacy string: int16 length, -1 for null; argument: nullable
_INT32_LENGTH = 2  # legacy bytes and records: int32 length, -1 for null; argument: nullable
_VARINT_LENGTH = 3  # compact string, bytes, records: unsigned varint length + 1, 0 for null; argument: nullable
_ARRAY = 4  # argument: _Array
_STRUCT = 5  # argument: _Plan
_NULLABLE_STRUCT = 6  # argument: _Plan

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class _Plan:
    steps: tuple[tuple[int, typing.Any], ...]
    flexible: bool
    tagged: dict[int, tuple[int, typing.Any]]  # tag -> step, for tagged fields that are structs or arrays
    min_size: int  # the fewest bytes one encoding of the struct takes


@dataclass(frozen=True, slots=True)
class _Array:
    element: tuple[int, typing.Any]  # the step that reads one element
    element_min_size: int
    compact: bool
    nullable: bool


def check_array_counts(cls: type, buf: memoryview | bytes | bytearray, offset: int) -> int:
    """Raise DecodeError if an array in the `cls` message at `offset` claims more elements than fit in the
    bytes after it; else return where the message ends."""
    view = memoryview(buf)
    return _walk_step((_STRUCT, _plan(cls)), view, offset, len(view))


def _walk_plan(plan: _Plan, buf: memoryview, pos: int, end: int) -> int:
    for step in plan.steps:
        if step[0] == _SKIP:
            pos += step[1]
        else:
            pos = _walk_step(step, buf, pos, end)
    if plan.flexible:
        _need(pos, 1, end)
        if buf[pos] == 0:  # no tagged fields, the usual case
            pos += 1
        else:
            pos = _walk_tags(plan, buf, pos, end)
    _need(pos, 0, end)
    return pos


def _walk_step(step: tuple[int, typing.Any], buf: memoryview, pos: int, end: int) -> int:
    kind, argument = step
    if kind == _SKIP:
        pos += argument
    elif kind == _VARINT_LENGTH:
        length, pos = _uvarint(buf, pos, end)
        _check_null(length == 0, argument)
        pos += max(0, length - 1)
    elif kind == _INT16_LENGTH or kind == _INT32_LENGTH:
        codec = _I16 if kind == _INT16_LENGTH else _I32
        _need(pos, codec.size, end)
        (length,) = codec.unpack_from(buf, pos)
        if length < -1:
            raise DecodeError(f"negative length {length}")
        _check_null(length == -1, argument)
        pos += codec.size + max(0, length)
    elif kind == _ARRAY:
        pos = _walk_array(argument, buf, pos, end)
    elif kind == _STRUCT:
        pos = _walk_plan(argument, buf, pos, end)
    else:
        assert kind == _NULLABLE_STRUCT
        _need(pos, 1, end)
        if buf[pos] == _NULL_STRUCT_MARKER:
            return pos + 1
        pos = _walk_plan(argument, buf, pos + 1, end)
    _need(pos, 0, end)
    return pos


def _walk_array(array: _Array, buf: memoryview, pos: int, end: int) -> int:
    if array.compact:
        count, pos = _uvarint(buf, pos, end)
        count -= 1
    else:
        _need(pos, 4, end)
        (count,) = _I32.unpack_from(buf, pos)
        pos += 4
    if count < -1:
        raise DecodeError(f"negative array length {count}")
    _check_null(count == -1, array.nullable)
    if count > (end - pos) // array.element_min_size:
        raise DecodeError(f"array of {count} elements cannot fit in {end - pos} bytes")
    kind, argument = array.element
    if kind == _SKIP:
        return pos + max(0, count) * argument
    if kind == _STRUCT:
        for _ in range(count):
            pos = _walk_plan(argument, buf, pos, end)
        return pos
    for _ in range(count):
        pos = _walk_step(array.element, buf, pos, end)
    return pos


def _walk_tags(plan: _Plan, buf: memoryview, pos: int, end: int) -> int:
    count, pos = _uvarint(buf, pos, end)
    if count > MAX_TAGGED_FIELDS:
        raise DecodeError(f"{count} tagged fields")
    for _ in range(count):
        tag, pos = _uvarint(buf, pos, end)
        size, pos = _uvarint(buf, pos, end)
        _need(pos, size, end)
        step = plan.tagged.get(tag)
        if step is not None:  # unknown and primitive tags hold no arrays
            _walk_step(step, buf, pos, pos + size)
        pos += size
    return pos


def _uvarint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    value = 0
    for i in range(MAX_VARINT_BYTES):
        _need(pos, 1, end)
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return value, pos
    raise DecodeError("unsigned varint longer than 5 bytes")


def _check_null(is_null: bool, nullable: bool) -> None:
    if is_null and not nullable:
        raise DecodeError("null in a field that is not nullable in this version")


def _need(pos: int, n: int, end: int) -> None:
    if pos + n > end:
        raise DecodeError(f"need {n} bytes at {pos}, have {end - pos}")


# --- compiling a kio schema into a plan ----------------------------------------------------------------------


@functools.cache
def _plan(cls: type) -> _Plan:
    flexible = cls.__flexible__
    hints = typing.get_type_hints(cls)
    steps: list[tuple[int, typing.Any]] = []
    tagged = {}
    for f in fields(cls):
        step = _field_step(hints[f.name], f.metadata.get("kafka_type", ""), flexible)
        if "tag" in f.metadata:
            if step[0] in (_ARRAY, _STRUCT, _NULLABLE_STRUCT):
                tagged[f.metadata["tag"]] = step
        elif steps and step[0] == _SKIP and steps[-1][0] == _SKIP:
            steps[-1] = (_SKIP, steps[-1][1] + step[1])
        else:
            steps.append(step)
    min_size = sum(_min_step_size(step) for step in steps) + (1 if flexible else 0)
    return _Plan(tuple(steps), flexible, tagged, max(1, min_size))


def _field_step(hint: typing.Any, kafka_type: str, flexible: bool) -> tuple[int, typing.Any]:
    nullable = False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        (hint,) = [a for a in typing.get_args(hint) if a is not type(None)]
        nullable = True
    if typing.get_origin(hint) is tuple:
        element = _value_step(typing.get_args(hint)[0], kafka_type, flexible, nullable=False)
        return _ARRAY, _Array(element, max(1, _min_step_size(element)), compact=flexible, nullable=nullable)
    if is_dataclass(hint) and nullable:
        return _NULLABLE_STRUCT, _plan(hint)
    return _value_step(hint, kafka_type, flexible, nullable)


def _value_step(hint: typing.Any, kafka_type: str, flexible: bool, nullable: bool) -> tuple[int, typing.Any]:
    if is_dataclass(hint):
        return _STRUCT, _plan(hint)
    if kafka_type in _LENGTH_PREFIXED:
        if flexible:
            return _VARINT_LENGTH, nullable
        return (_INT16_LENGTH if kafka_type == "string" else _INT32_LENGTH), nullable
    return _SKIP, _FIXED_SIZES[kafka_type]


def _min_step_size(step: tuple[int, typing.Any]) -> int:
    kind, argument = step
    if kind == _SKIP:
        return argument
    if kind == _STRUCT:
        return argument.min_size
    if kind == _ARRAY:
        return 1 if argument.compact else 4  # an empty or null array is just its count
    return {_VARINT_LENGTH: 1, _INT16_LENGTH: 2, _INT32_LENGTH: 4, _NULLABLE_STRUCT: 1}[kind]
