"""Refuse a request whose array lengths exceed its bytes before kio's native reader sees it.

kio's entity readers are native code that reserve room for an array's declared length before
reading its items: a 100-byte frame declaring 4 billion elements asks for about 170 GB, the
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


@cache
def _layout(cls: type) -> tuple[tuple[Field[Any], ...], dict[int, Field[Any]]]:
    regular, tagged = [], {}
    for f in fields(cls):
        tag = get_field_tag(f)
        if tag is None:
            regular.append(f)
        else:
            tagged[int(tag)] = f
    return tuple(regular), tagged


def _entity(cls: Any, buf: memoryview, pos: int, end: int) -> int:
    regular, tagged = _layout(cls)
    flexible = bool(cls.__flexible__)
    for f in regular:
        pos = _field(f, flexible, buf, pos, end)
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


def _field(f: Field[Any], flexible: bool, buf: memoryview, pos: int, end: int) -> int:
    kind = classify_field(f)
    if isinstance(kind, EntityField):
        if is_optional(f):
            marker, pos = _int(buf, pos, end, 1)
            if marker < 0:
                return pos
        return _entity(kind.type_, buf, pos, end)
    many = isinstance(kind, EntityTupleField | PrimitiveTupleField)
    if not many:
        return _primitive(f.metadata["kafka_type"], flexible, buf, pos, end)
    if flexible:
        count, pos = _uvarint(buf, pos, end)
        count -= 1  # compact arrays store length + 1; 0 is null
    else:
        count, pos = _int(buf, pos, end, 4)
    if count <= 0:
        return pos
    _fits(count, pos, end, f"array {f.name}")
    for _ in range(count):
        if isinstance(kind, EntityTupleField):
            pos = _entity(kind.type_, buf, pos, end)
        else:
            pos = _primitive(f.metadata["kafka_type"], flexible, buf, pos, end)
    return pos


def _primitive(kafka_type: str, flexible: bool, buf: memoryview, pos: int, end: int) -> int:
    size = _FIXED.get(kafka_type)
    if size is not None:
        _fits(size, pos, end, kafka_type)
        return pos + size
    if kafka_type not in _VARIABLE:
        raise LengthError(f"unknown field type {kafka_type}")
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
    if count > end - pos:
        raise LengthError(f"{what} of length {count} but only {max(end - pos, 0)} bytes remain")


def _int(buf: memoryview, pos: int, end: int, size: int) -> tuple[int, int]:
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
