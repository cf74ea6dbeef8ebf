"""Drop tagged fields an entity does not declare, so kio can decode messages from newer peers.

KIP-482 says a receiver must ignore tagged fields it does not know; kio instead raises KeyError.
This walker follows the entity's schema, copies every byte it understands and leaves out the
unknown tags (recursively, so nested structs and known tagged structs are cleaned too). It only
runs on the rare message that made kio fail, so it favours clarity over speed.
"""

from __future__ import annotations

import io
from dataclasses import Field, fields
from functools import cache
from typing import Any, cast

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)
from kio.serial._parse import get_field_reader
from kio.serial.readers import read_int8, read_unsigned_varint
from kio.serial.writers import write_unsigned_varint
from kio.static.primitive import uvarint
from kio.static.protocol import Entity


def skip_tagged_fields(buf: bytes, offset: int) -> int:
    count, size = read_unsigned_varint(buf, offset)
    offset += size
    for _ in range(count):
        _tag, size = read_unsigned_varint(buf, offset)
        offset += size
        length, size = read_unsigned_varint(buf, offset)
        offset += size + length
    if offset > len(buf):
        raise ValueError("tagged field runs past the end of the buffer")
    return offset


def strip_unknown_tags(cls: type[Entity] | None, buf: bytes, offset: int) -> tuple[bytes, int]:
    """Return (the entity's bytes without unknown tags, bytes consumed from `offset`)."""
    if cls is None:
        return b"", skip_tagged_fields(buf, offset) - offset
    out = io.BytesIO()
    end = _copy_entity(cls, buf, offset, out)
    return out.getvalue(), end - offset


@cache
def _layout(cls: type) -> tuple[list[Field[Any]], dict[int, Field[Any]]]:
    regular: list[Field[Any]] = []
    tagged: dict[int, Field[Any]] = {}
    for f in fields(cls):
        tag = get_field_tag(f)
        if tag is None:
            regular.append(f)
        else:
            tagged[tag] = f
    return regular, tagged


def _is_header(cls: type) -> bool:
    return cls.__name__ == "RequestHeader"


def _copy_entity(cls: type[Entity], buf: bytes, offset: int, out: io.BytesIO) -> int:
    regular, tagged = _layout(cls)
    for f in regular:
        offset = _copy_field(cls, f, buf, offset, out)
    if not cls.__flexible__:
        return offset
    count, size = read_unsigned_varint(buf, offset)
    offset += size
    kept: list[tuple[uvarint, bytes]] = []
    for _ in range(count):
        tag, size = read_unsigned_varint(buf, offset)
        offset += size
        length, size = read_unsigned_varint(buf, offset)
        offset += size
        data = buf[offset : offset + length]
        offset += length
        known = tagged.get(tag)
        if known is None:
            continue
        kind = classify_field(known)
        if isinstance(kind, EntityField):
            inner = io.BytesIO()
            _copy_entity(kind.type_, data, 0, inner)
            data = inner.getvalue()
        kept.append((tag, data))
    # kio's uvarint is a phantom type: a plain int at runtime, narrowed here for the checker.
    write_unsigned_varint(out, cast(uvarint, len(kept)))
    for tag, data in kept:
        write_unsigned_varint(out, tag)
        write_unsigned_varint(out, cast(uvarint, len(data)))
        out.write(data)
    return offset


def _copy_field(cls: type, f: Any, buf: bytes, offset: int, out: io.BytesIO) -> int:
    kind = classify_field(f)
    if isinstance(kind, EntityField):
        if is_optional(f):
            marker, size = read_int8(buf, offset)
            out.write(buf[offset : offset + size])
            offset += size
            if marker < 0:
                return offset
        return _copy_entity(kind.type_, buf, offset, out)
    if isinstance(kind, EntityTupleField):
        count, size = read_unsigned_varint(buf, offset)
        out.write(buf[offset : offset + size])
        offset += size
        for _ in range(max(count - 1, 0)):
            offset = _copy_entity(kind.type_, buf, offset, out)
        return offset
    reader = get_field_reader(cls, f, _is_header(cls), False)
    _value, size = reader(buf, offset)
    out.write(buf[offset : offset + size])
    return offset + size
