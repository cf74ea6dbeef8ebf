"""Refuse a request whose array lengths exceed its bytes before kio's native reader sees it.

kio's entity readers are native code that reserve room for an array's declared length before
reading its items: an 85-byte frame declaring 4 billion elements asks for about 170 GB, the
allocation fails and the Rust runtime aborts the whole process — one request kills the broker
(found by ci/fuzz, docs/fuzzing.md). Kafka's generated readers refuse such a length ("Tried to
allocate a collection of size N, but there are only M bytes remaining"); this walker does the
same in Python: it follows the entity's schema over the bytes, checking every array length
against what is left of the frame (each element takes at least one byte), and raises
LengthError at the first that cannot fit. It only measures, never builds values, so kio still
does the decoding.
"""

from __future__ import annotations

from dataclasses import Field, fields
from functools import cache
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

_FIXED = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1, "uint16": 2, "uint32": 4,
          "uint64": 8, "float64": 8, "bool": 1, "uuid": 16, "error_code": 2,
          "timedelta_i32": 4, "timedelta_i64": 8, "datetime_i64": 8}
_VARIABLE = ("string", "bytes", "records")


class LengthError(ValueError):
    """A length in the message that its remaining bytes cannot hold."""


def check_lengths(cls: type, buf: bytes | memoryview, offset: int) -> int:
    """Walk one `cls` entity at `offset`; return where it ends. Raises LengthError."""
    return _entity(cls, memoryview(buf), offset, len(buf))


# One step of the walk per field: (kind, detail, nested entity class, optional).
_FIXED_KIND, _VARIABLE_KIND, _ENTITY, _ENTITY_ARRAY, _PRIMITIVE_ARRAY = range(5)
_Step = tuple[int, Any, Any, bool]


@cache
def _plan(cls: type) -> tuple[tuple[_Step, ...], dict[int, _Step], bool]:
    """The walk of `cls`, worked out once: regular fields, tagged fields by tag, flexible."""
    regular: list[_Step] = []
    tagged: dict[int, _Step] = {}
    for f in fields(cls):
        tag = get_field_tag(f)
        if tag is None:
            regular.append(_step(f))
        else:
            tagged[int(tag)] = _step(f)
    return tuple(regular), tagged, bool(getattr(cls, "__flexible__", False))


def _step(f: Field[Any]) -> _Step:
    kind = classify_field(f)
    if isinstance(kind, EntityField):
        return _ENTITY, None, kind.type_, is_optional(f)
    if isinstance(kind, EntityTupleField):
        return _ENTITY_ARRAY, None, kind.type_, False
    kafka_type = f.metadata["kafka_type"]
    if kafka_type not in _FIXED and kafka_type not in _VARIABLE:
        raise LengthError(f"unknown field type {kafka_type} of {f.name}")
    if isinstance(kind, PrimitiveTupleField):
        return _PRIMITIVE_ARRAY, kafka_type, None, False
    if kafka_type in _FIXED:
        return _FIXED_KIND, _FIXED[kafka_type], None, False
    return _VARIABLE_KIND, kafka_type, None, False


def _entity(cls: Any, buf: memoryview, pos: int, end: int) -> int:
    regular, tagged, flexible = _plan(cls)
    for step in regular:
        pos = _field(step, flexible, buf, pos, end)
    if not flexible:
        return pos
    count, pos = _uvarint(buf, pos, end)
    _fits(count, pos, end, "tagged fields")
    for _ in range(count):
        tag, pos = _uvarint(buf, pos, end)
        size, pos = _uvarint(buf, pos, end)
        _fits(size, pos, end, "tagged field")
        known = tagged.get(tag)
        if known is not None:
            _field(known, flexible, buf, pos, pos + size)
        pos += size
    return pos


def _field(step: _Step, flexible: bool, buf: memoryview, pos: int, end: int) -> int:
    kind, detail, nested, optional = step
    if kind == _FIXED_KIND:
        if detail > end - pos:
            _fits(detail, pos, end, "field")
        return pos + detail
    if kind == _VARIABLE_KIND:
        return _primitive(detail, flexible, buf, pos, end)
    if kind == _ENTITY:
        if optional:
            marker, pos = _int(buf, pos, end, 1)
            if marker < 0:
                return pos
        return _entity(nested, buf, pos, end)
    if flexible:
        count, pos = _uvarint(buf, pos, end)
        count -= 1  # compact arrays store length + 1; 0 is null
    else:
        count, pos = _int(buf, pos, end, 4)
    if count <= 0:
        return pos
    _fits(count, pos, end, "array")
    if kind == _ENTITY_ARRAY:
        for _ in range(count):
            pos = _entity(nested, buf, pos, end)
        return pos
    size = _FIXED.get(detail)
    if size is not None:
        _fits(count * size, pos, end, "array")
        return pos + count * size
    for _ in range(count):
        pos = _primitive(detail, flexible, buf, pos, end)
    return pos


def _primitive(kafka_type: str, flexible: bool, buf: memoryview, pos: int, end: int) -> int:
    if flexible:
        length, pos = _uvarint(buf, pos, end)
        length -= 1
    else:
        length, pos = _int(buf, pos, end, 2 if kafka_type == "string" else 4)
    if length <= 0:
        return pos
    _fits(length, pos, end, kafka_type)
    return pos + length


def _fits(count: int, pos: int, end: int, what: str) -> None:
    """Raise unless `count` bytes (or one-byte elements) fit between `pos` and `end`."""
    if count > end - pos:
        raise LengthError(f"{what} of length {count} but only {max(end - pos, 0)} bytes remain")


def _int(buf: memoryview, pos: int, end: int, size: int) -> tuple[int, int]:
    if size > end - pos:
        _fits(size, pos, end, f"int{size * 8}")
    return int.from_bytes(buf[pos:pos + size], "big", signed=True), pos + size


def _uvarint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 28:
            raise LengthError("truncated or overlong varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
