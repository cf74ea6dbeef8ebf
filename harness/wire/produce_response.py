"""Produce responses v3-v11 written straight from the broker's plain dicts.

Why: a producer sends one Produce request per batch, so the response writer runs once per
batch on the broker's hot path, and kio's general writer (dicts turned into entities, then one
writer call per field) was the largest piece of Python work per Produce request in
``bench-results/profile-reference-produce.txt``. This writer packs the same bytes with a few
``struct`` calls. It covers exactly the fields the broker fills; anything else (a current leader
or node endpoints, a value that is not a plain int, a version outside 3-11) makes it return
None and the caller uses kio's writer. tests/wire/test_produce_response.py holds its output
equal to kio's, byte for byte, for every version.

Layout (Kafka's ProduceResponse schema): per topic its name and partitions; per partition
index, error code, base offset, log append time (v2+), log start offset (v5+), record errors
and error message (v8+); then the throttle time. v9+ are flexible: compact lengths, an empty
tagged-field section after each struct, and response header v1 (one more empty tag section).
Tagged fields equal to their defaults (current leader -1/-1, no node endpoints) are not written,
as Kafka and kio leave them out.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

MIN_VERSION = 3
MAX_VERSION = 11
FIRST_FLEXIBLE = 9

_PARTITION_KEYS = frozenset({"index", "error_code", "base_offset", "log_append_time",
                             "log_start_offset", "record_errors", "error_message"})
_TOPIC_KEYS = frozenset({"name", "topic_id", "partition_responses"})  # topic_id: v13+ only
_BODY_KEYS = frozenset({"responses", "throttle_time"})
_RECORD_ERROR_KEYS = frozenset({"batch_index", "batch_index_error_message"})

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_FRAME_HEAD = struct.Struct(">ii")  # size prefix, correlation id
_IHQQ = struct.Struct(">ihqq")  # index, error code, base offset, log append time
_Q = struct.Struct(">q")


class _Unsupported(Exception):
    """The body holds something this writer does not write; kio's writer must."""


def encode_produce_response(version: int, correlation_id: int,
                            body: Mapping[str, Any]) -> bytes | None:
    """The size-prefixed response frame, or None when kio's writer has to write this one."""
    if not MIN_VERSION <= version <= MAX_VERSION or not isinstance(body, dict) \
            or not body.keys() <= _BODY_KEYS:
        return None
    try:
        return _encode(version, correlation_id, body)
    except (_Unsupported, struct.error):  # struct.error: not an int (e.g. an error's name)
        return None


def _encode(version: int, correlation_id: int, body: dict[str, Any]) -> bytes:
    flexible = version >= FIRST_FLEXIBLE
    out = bytearray(8)
    if flexible:
        out.append(0)  # response header v1: no tagged fields
    responses = body["responses"]
    _length(out, len(responses), flexible)
    for topic in responses:
        if not topic.keys() <= _TOPIC_KEYS:
            raise _Unsupported
        _string(out, topic["name"], flexible)
        partitions = topic["partition_responses"]
        _length(out, len(partitions), flexible)
        for p in partitions:
            _partition(out, p, version, flexible)
        if flexible:
            out.append(0)
    throttle = body.get("throttle_time", 0)
    if type(throttle) is not int:
        raise _Unsupported
    out += _I32.pack(throttle)
    if flexible:
        out.append(0)
    _FRAME_HEAD.pack_into(out, 0, len(out) - 4, correlation_id)
    return bytes(out)


def _partition(out: bytearray, p: dict[str, Any], version: int, flexible: bool) -> None:
    if not p.keys() <= _PARTITION_KEYS:
        raise _Unsupported
    append_time = p.get("log_append_time", -1)
    if not isinstance(append_time, int):
        raise _Unsupported  # a datetime: kio's conversion decides its milliseconds
    out += _IHQQ.pack(p["index"], p["error_code"], p["base_offset"],
                      append_time if append_time >= 0 else -1)
    if version >= 5:
        out += _Q.pack(p.get("log_start_offset", -1))
    if version >= 8:
        errors = p.get("record_errors", ())
        _length(out, len(errors), flexible)
        for error in errors:
            if not error.keys() <= _RECORD_ERROR_KEYS:
                raise _Unsupported
            out += _I32.pack(error["batch_index"])
            _nullable_string(out, error.get("batch_index_error_message"), flexible)
            if flexible:
                out.append(0)
        _nullable_string(out, p.get("error_message"), flexible)
    if flexible:
        out.append(0)  # current_leader left at its default: not written


def _uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _length(out: bytearray, n: int, flexible: bool) -> None:
    if flexible:
        _uvarint(out, n + 1)
    else:
        out += _I32.pack(n)


def _string(out: bytearray, value: Any, flexible: bool) -> None:
    if type(value) is not str:
        raise _Unsupported  # kio refuses a null topic name; let it say so
    data = value.encode()
    if flexible:
        _uvarint(out, len(data) + 1)
    else:
        out += _I16.pack(len(data))
    out += data


def _nullable_string(out: bytearray, value: str | None, flexible: bool) -> None:
    if value is None:
        if flexible:
            out.append(0)
        else:
            out += _I16.pack(-1)
        return
    _string(out, value, flexible)
