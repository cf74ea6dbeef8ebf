"""JSON readers for znode data that name the znode and field when the data is malformed.

Kafka's znodes are written by many versions and, in a test, by hand; a decoder that says
"``/brokers/ids/2``: field 'port' must be an integer" is what makes a bad znode fixable.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any


class ZkDataError(ValueError):
    """A znode's content does not match Kafka's schema for it."""


def encode_json(value: Any) -> bytes:
    """Compact JSON, as Kafka's Jackson writer produces it."""
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def decode_json_object(data: bytes, where: str) -> dict[str, Any]:
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZkDataError(f"{where}: not JSON: {data[:200]!r}") from exc
    if not isinstance(value, dict):
        raise ZkDataError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def int_field(obj: Mapping[str, Any], key: str, where: str) -> int:
    value = obj.get(key)
    # bool is an int subclass; JSON true is not a broker id.
    if not isinstance(value, int) or isinstance(value, bool):
        raise ZkDataError(f"{where}: field {key!r} must be an integer, got {value!r}")
    return value


def str_field(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise ZkDataError(f"{where}: field {key!r} must be a string, got {value!r}")
    return value


def int_list(value: Any, what: str, where: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(item, int) and not isinstance(item, bool) for item in value
    ):
        raise ZkDataError(f"{where}: {what} must be a list of integers, got {value!r}")
    return tuple(value)


def object_field(obj: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    value = obj.get(key, {})
    if not isinstance(value, dict):
        raise ZkDataError(f"{where}: field {key!r} must be a JSON object, got {value!r}")
    return value


def uuid_to_base64(raw: bytes) -> str:
    """Kafka's textual Uuid: 16 bytes as URL-safe base64 without padding, 22 characters."""
    if len(raw) != 16:
        raise ValueError(f"a Kafka Uuid is 16 bytes, got {len(raw)}")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def is_base64_uuid(text: str) -> bool:
    """Whether ``text`` is a 22-character URL-safe base64 encoding of 16 bytes."""
    if len(text) != 22:
        return False
    try:
        return len(base64.urlsafe_b64decode(text + "==")) == 16
    except ValueError:
        return False
