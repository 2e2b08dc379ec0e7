"""Control-plane message codecs built on kio's schema types (generated from Kafka's JSON message specs).

Handlers describe a response as plain nested dicts; `build` turns them into the kio dataclass of the exact
version negotiated, dropping keys that version does not have, so one handler serves every version.
The produce and fetch hot paths do not come through here: see produce.py and fetch.py.
"""

import datetime
import functools
import io
import types
import typing
from dataclasses import MISSING, fields, is_dataclass
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import DecodeError as KioDecodeError

from .kio_bounds import check_array_counts
from .primitives import DecodeError


@functools.cache
def request_type(api_key: int, version: int) -> type:
    return load_request_schema(api_key, version)


@functools.cache
def response_type(api_key: int, version: int) -> type:
    return load_response_schema(api_key, version)


def decode_request(api_key: int, version: int, buf: memoryview | bytes, offset: int) -> Any:
    # Bytes after a request body are ignored, as Kafka's RequestContext.parseRequest ignores them:
    # librdkafka 2.15/2.16 send 3 extra bytes after a Metadata v12 request.
    return _decode(request_type(api_key, version), buf, offset, allow_trailing=True)


def decode_response(api_key: int, version: int, buf: memoryview | bytes, offset: int) -> Any:
    return _decode(response_type(api_key, version), buf, offset, allow_trailing=False)


def _decode(cls: type, buf: memoryview | bytes | bytearray, offset: int, *, allow_trailing: bool) -> Any:
    buf = memoryview(buf).toreadonly()  # kio's native reader refuses writable buffers; this is a view
    check_array_counts(cls, buf, offset)  # kio reserves room for a declared count before reading any element
    try:
        entity, size = entity_reader(cls)(buf, offset)
    except (KioDecodeError, ValueError, OverflowError) as e:
        raise DecodeError(f"malformed {cls.__name__}: {e}") from e
    except KeyError as e:
        # kio refuses a tagged field its schema lacks, where Kafka would skip it (KIP-482); a peer that
        # sends one gets its connection closed rather than an internal error.
        raise DecodeError(f"{cls.__name__}: {e.args[0]}") from e
    if offset + size != len(buf) and not allow_trailing:
        raise DecodeError(f"{len(buf) - offset - size} trailing bytes after {cls.__name__}")
    return entity


def encode_response(api_key: int, version: int, data: dict) -> bytes:
    return encode(build(response_type(api_key, version), data))


def encode_request(api_key: int, version: int, data: dict) -> bytes:
    return encode(build(request_type(api_key, version), data))


def encode(entity: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


@functools.cache
def _field_plan(cls: type) -> tuple[tuple[str, str, type | None, bool, bool], ...]:
    """Per field: (name, kafka_type, nested entity type, is_tuple, has_default)."""
    hints = typing.get_type_hints(cls)
    plan = []
    for f in fields(cls):
        nested, is_tuple = _nested_entity(hints[f.name])
        has_default = f.default is not MISSING or f.default_factory is not MISSING
        plan.append((f.name, f.metadata.get("kafka_type", ""), nested, is_tuple, has_default))
    return tuple(plan)


def _nested_entity(hint: Any) -> tuple[type | None, bool]:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return _nested_entity(inner[0]) if len(inner) == 1 else (None, False)
    if origin is tuple:
        element = typing.get_args(hint)[0]
        return (element, True) if is_dataclass(element) else (None, True)
    return (hint, False) if is_dataclass(hint) else (None, False)


def build(cls: type, data: dict) -> Any:
    """Make the kio entity `cls` from a dict, converting ints to the wire types kio wants."""
    kwargs = {}
    for name, kafka_type, nested, is_tuple, has_default in _field_plan(cls):
        if name not in data:
            if not has_default:
                raise KeyError(f"{cls.__module__}.{cls.__name__} needs field {name!r}")
            continue
        kwargs[name] = _convert(data[name], kafka_type, nested, is_tuple)
    return cls(**kwargs)


def _convert(value: Any, kafka_type: str, nested: type | None, is_tuple: bool) -> Any:
    if value is None:
        return None
    if nested is not None:
        if is_tuple:
            return tuple(v if isinstance(v, nested) else build(nested, v) for v in value)
        return value if isinstance(value, nested) else build(nested, value)
    if is_tuple:
        return tuple(value)
    if kafka_type == "error_code":
        return ErrorCode(value)
    if kafka_type in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    return value


def millis(value: datetime.timedelta | int) -> int:
    """kio decodes duration fields (timeouts) as timedeltas; handlers want milliseconds."""
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return value
