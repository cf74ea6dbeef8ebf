"""Request/response codec on top of kio: headers, bodies and version-independent message building.

Handlers in the broker (and the raw-protocol client of the suites) describe messages as plain
nested dicts; `build` turns such a dict into the kio entity of the exact version negotiated,
dropping fields that version lacks and filling defaults. That keeps one handler for all versions
of an API instead of one per version. A key that no version of the message has is refused: it is
a misspelling, and dropping it would silently send the field's default instead.
"""

from __future__ import annotations

import datetime
import importlib
import io
import pkgutil
import re
import struct
import uuid
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields, is_dataclass, make_dataclass
from dataclasses import field as dataclass_field
from functools import cache
from typing import Any, cast, get_args, get_origin

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional
from kio.serial.errors import OutOfBoundValue
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32
from kio.static.protocol import Entity

from . import zk_era
from .bounds import LengthError, check_lengths
from .errors import ErrorCode
from .errors import error_name as error_name  # re-exported: suites and tests use it here
from .tags import strip_unknown_tags

API_VERSIONS_KEY = 18
_I32 = struct.Struct(">i")
_HEADER_PREFIX = struct.Struct(">hhi")
_API_NAMES: dict[int, str] = {**api_key_map, **zk_era.API_NAMES}


class ProtocolError(Exception):
    """A frame the broker cannot process; the connection that sent it is closed."""


@dataclass(frozen=True, slots=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any  # the kio request entity

    @property
    def api_name(self) -> str:
        return _API_NAMES.get(self.api_key, f"api_{self.api_key}")


def api_name(api_key: int) -> str:
    return _API_NAMES.get(api_key, f"unknown({api_key})")


@cache
def request_class(api_key: int, version: int) -> type[Entity] | None:
    return _payload_class(api_key, version, EntityType.request)


@cache
def response_class(api_key: int, version: int) -> type[Entity] | None:
    return _payload_class(api_key, version, EntityType.response)


def _payload_class(api_key: int, version: int, kind: EntityType) -> type[Entity] | None:
    if api_key in zk_era.API_NAMES:
        pair = zk_era.ENTITIES.get((api_key, version))
        if pair is None:
            return None
        # zk_era's decorator sets kio's entity markers (__flexible__, ...) at runtime.
        return cast("type[Entity]", pair[kind is EntityType.response])
    loader = load_request_schema if kind is EntityType.request else load_response_schema
    try:
        return loader(api_key, version)
    except (KioIndexError, ImportError):
        return None


@cache
def modelled_versions(api_key: int) -> tuple[int, ...]:
    """Every version of an API with both a request and a response type (kio's or zk_era's).

    Read from kio's index of its schema modules, not by importing them: a broker asks this of
    every API it serves as it starts, and importing every version's types (some 630 modules, a
    dataclass each) cost each broker process 0.7 s of CPU at every start, for the handful of
    versions its clients use. tests/wire/test_protocol.py holds the index to the
    imports."""
    if api_key in zk_era.API_NAMES:
        return tuple(sorted(v for key, v in zk_era.ENTITIES if key == api_key))
    name = api_key_map.get(api_key)
    versions = schema_name_map.get(name, {}) if name is not None else {}
    both = {EntityType.request, EntityType.response}
    return tuple(sorted(v for v, kinds in versions.items() if both <= set(kinds)))


def is_flexible(api_key: int, version: int) -> bool:
    cls = request_class(api_key, version)
    return bool(cls is not None and cls.__flexible__)


_read_header_v1 = entity_reader(RequestHeaderV1)
_read_header_v2 = entity_reader(RequestHeaderV2)


def peek_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """api_key, api_version, correlation_id: readable from any frame with at least 8 bytes."""
    if len(frame) < 8:
        raise ProtocolError(f"truncated request header ({len(frame)} bytes)")
    return _HEADER_PREFIX.unpack_from(frame, 0)


def decode_request(
    frame: bytes | memoryview, supported: Callable[[int, int], bool] | None = None
) -> Request:
    """Decode one frame (without its size prefix). Raises ProtocolError with the reason.

    `supported(api_key, version)` lets the caller reject versions it does not implement before
    any body parsing; ApiVersions is always parsed leniently (KIP-511) by the caller instead.
    """
    api_key, version, correlation_id = peek_header(frame)
    if api_key not in _API_NAMES:
        raise ProtocolError(f"unknown api key {api_key}")
    if supported is not None and not supported(api_key, version):
        raise ProtocolError(f"unsupported version {version} of {api_name(api_key)}")
    cls = request_class(api_key, version)
    if cls is None:
        raise ProtocolError(f"unsupported version {version} of {api_name(api_key)}")
    flexible = cls.__flexible__
    header_reader = _read_header_v2 if flexible else _read_header_v1
    try:
        header, header_size = _read_entity(header_reader, RequestHeaderV2 if flexible else
                                           RequestHeaderV1, frame, 0)
        try:
            check_lengths(cls, frame, header_size)  # kio's native reader aborts on huge arrays
        except LengthError as exc:
            raise ProtocolError(
                f"malformed {api_name(api_key)} v{version} request: {exc}") from None
        body, _body_size = _read_entity(entity_reader(cls), cls, frame, header_size)
    except ProtocolError:
        raise
    except Exception as exc:  # kio raises assorted errors on short or invalid input
        raise ProtocolError(
            f"malformed {api_name(api_key)} v{version} request: {type(exc).__name__}: {exc}"
        ) from exc
    # Bytes after the body are ignored, as Kafka's own request parsing does: librdkafka 2.x
    # appends some to Metadata v13 requests, and the broker must serve it anyway.
    missing = _null_required_field(body)
    if missing is not None:
        # kio reads a length of -1 as None whether or not the field is nullable. Kafka's parser
        # refuses a null non-nullable field; a handler iterating one raised TypeError, logged
        # as "Unexpected error" (found by ci/fuzz, tests/fuzz/test_regressions.py).
        raise ProtocolError(
            f"malformed {api_name(api_key)} v{version} request: non-nullable field {missing} "
            "is null")
    return Request(api_key, version, correlation_id, header.client_id, body)


def _null_required_field(entity: Any) -> str | None:
    """The path of the first non-nullable field of `entity` (recursively) holding None."""
    cls: Any = type(entity)
    for name, required, nested, many in _nullability(cls):
        value = getattr(entity, name)
        if value is None:
            if required:
                return name
            continue
        if nested:
            for item in value if many else (value,):
                inner = _null_required_field(item)
                if inner is not None:
                    return f"{name}.{inner}"
    return None


@cache
def _nullability(cls: type) -> tuple[tuple[str, bool, bool, bool], ...]:
    """Per field: name, non-nullable, holds entities, is an array of them."""
    plan = []
    for f in fields(cls):
        kind = classify_field(f)
        many = isinstance(kind, EntityTupleField)
        plan.append((f.name, not is_optional(f), many or isinstance(kind, EntityField), many))
    return tuple(plan)


def _read_entity(reader: Callable, cls: type, frame: bytes | memoryview, offset: int) -> tuple:
    try:
        return reader(frame, offset)
    except KeyError:
        # kio rejects tagged fields it does not know; the protocol says to ignore them.
        cleaned, consumed = strip_unknown_tags(cls, bytes(frame), offset)
        value, size = reader(cleaned, 0)
        if size != len(cleaned):
            raise ProtocolError("inconsistent tagged fields") from None
        return value, consumed


def encode_request(request: Request | None = None, *, api_key: int = -1, api_version: int = -1,
                   correlation_id: int = 0, client_id: str | None = "kafka-harness",
                   body: Any = None) -> bytes:
    """Encode a request with its size prefix (used by the raw-protocol client and tests)."""
    if request is not None:
        api_key, api_version = request.api_key, request.api_version
        correlation_id, client_id, body = request.correlation_id, request.client_id, request.body
    cls = request_class(api_key, api_version)
    if cls is None:
        raise ValueError(f"kio does not model {api_name(api_key)} v{api_version}")
    if isinstance(body, Mapping):
        body = build(cls, body)
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    header_cls = RequestHeaderV2 if cls.__flexible__ else RequestHeaderV1
    # kio's integer types are phantom types: plain ints at runtime, narrowed here for the checker.
    header = header_cls(request_api_key=cast(i16, api_key),
                        request_api_version=cast(i16, api_version),
                        correlation_id=cast(i32, correlation_id), client_id=client_id)
    entity_writer(header_cls)(out, header)
    entity_writer(cls)(out, body)
    data = out.getbuffer()
    _I32.pack_into(data, 0, len(data) - 4)
    return bytes(data)


def encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """Encode a response with size prefix; header v1 for flexible versions except ApiVersions."""
    chunks = encode_response_chunks(api_key, version, correlation_id, body)
    if len(chunks) != 1 or not isinstance(chunks[0], bytes):
        raise ValueError("response holds deferred data: use encode_response_chunks")
    return chunks[0]


def encode_response_chunks(
    api_key: int, version: int, correlation_id: int, body: Any
) -> list[Any]:
    """Encode a response that may carry `Deferred` fields: bytes chunks in order, with each
    deferred field's parts (e.g. file regions) left in place for the transport to send."""
    cls = response_class(api_key, version)
    if cls is None:
        raise ValueError(f"kio does not model {api_name(api_key)} v{version}")
    if isinstance(body, Mapping):
        body = build(cls, body)
    elif type(body) is raw_timestamps(cls):
        cls = cast(type[Entity], type(body))  # decoded with raw timestamps: written back so
    out = _ChunkedBuffer()
    out.write(b"\0\0\0\0")
    out.write(_I32.pack(correlation_id))
    if cls.__flexible__ and api_key != API_VERSIONS_KEY:
        out.write(b"\0")  # empty tagged fields of response header v1
    _writer(cls)(out, body)
    return out.finish()


class Deferred(bytes):
    """Stands in for `size` bytes of a bytes/records field that are not in memory.

    kio's writers take `len(value)` for the length prefix and then `write(value)`; this object
    reports the real size and, written to a `_ChunkedBuffer`, leaves its `parts` (objects with a
    `size`, such as log file regions) in the output for zero-copy sending.
    """

    size: int
    parts: tuple[Any, ...]

    def __new__(cls, parts: Any) -> Deferred:
        obj = super().__new__(cls)
        obj.parts = tuple(parts)
        obj.size = sum(part.size for part in obj.parts)
        return obj

    def __len__(self) -> int:
        return self.size


class _ChunkedBuffer:
    def __init__(self) -> None:
        self._chunks: list[Any] = []
        self._current = bytearray()
        self._size = 0

    def write(self, data: Any) -> int:
        if isinstance(data, Deferred):
            self._flush()
            self._chunks.extend(data.parts)
            self._size += data.size
            return data.size
        self._current += data
        return len(data)

    def _flush(self) -> None:
        if self._current:
            self._size += len(self._current)
            self._chunks.append(bytes(self._current))
            self._current = bytearray()

    def finish(self) -> list[Any]:
        """Patch the frame's size prefix (its first 4 bytes) and return the chunks."""
        total = self._size + len(self._current)
        if self._chunks:
            first = bytearray(self._chunks[0])
            _I32.pack_into(first, 0, total - 4)
            self._chunks[0] = bytes(first)
        else:
            _I32.pack_into(self._current, 0, total - 4)
        self._flush()
        return self._chunks


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    """Decode a response frame (without size prefix) → (correlation_id, body entity)."""
    cls = response_class(api_key, version)
    if cls is None:
        raise ValueError(f"kio does not model {api_name(api_key)} v{version}")
    (correlation_id,) = _I32.unpack_from(frame, 0)
    offset = 4
    if cls.__flexible__ and api_key != API_VERSIONS_KEY:
        offset += 1
        if frame[4] != 0:
            _, offset = strip_unknown_tags(None, frame, 4)
    try:
        body, _size = _read_entity(entity_reader(cls), cls, frame, offset)
    except OutOfBoundValue:
        raw = raw_timestamps(cls)
        body, _size = _read_entity(entity_reader(raw), raw, frame, offset)
    return correlation_id, body


@cache
def raw_timestamps(cls: type) -> type:
    """``cls`` with its timestamps read as plain int64 milliseconds.

    Kafka writes -1 for "no time" in fields kio types as datetimes — a refused
    CreateDelegationToken's issue, expiry and max timestamps — and kio refuses to decode a
    negative datetime (OutOfBoundValue). Such an answer is still a well-formed response; it is
    decoded with this variant, whose other fields are the same. Nested entities are read the
    same way: DescribeTransactions answers an Empty transaction's start time -1 in each of its
    ``transaction_states``."""
    def raw(f: Any) -> tuple[str, Any, Any]:
        if f.metadata.get("kafka_type") == "datetime_i64":
            return f.name, int, dataclass_field(metadata={**f.metadata, "kafka_type": "int64"})
        args = get_args(f.type)
        if get_origin(f.type) is tuple and isinstance(args[0], type) and is_dataclass(args[0]):
            nested: Any = tuple.__class_getitem__((raw_timestamps(args[0]), ...))
            return f.name, nested, dataclass_field(metadata=f.metadata)
        if isinstance(f.type, type) and is_dataclass(f.type):
            return f.name, raw_timestamps(f.type), dataclass_field(metadata=f.metadata)
        return f.name, f.type, dataclass_field(metadata=f.metadata)

    keep = ("__type__", "__version__", "__flexible__", "__api_key__", "__header_schema__")
    namespace = {name: getattr(cls, name) for name in keep if hasattr(cls, name)}
    return make_dataclass(f"RawTimestamps{cls.__name__}", [raw(f) for f in fields(cls)],
                          namespace=namespace, frozen=True, slots=True)


@cache
def _writer(cls: type) -> Callable:
    return entity_writer(cls)


# --- building entities from plain data --------------------------------------------------------


def build(cls: type, data: Any) -> Any:
    """Turn nested dicts/lists into the kio entity `cls`, keeping only fields `cls` has.

    Keys of another version of the same message are dropped (one dict serves every version);
    a key of no version raises UnknownFieldError.
    """
    if data is None or isinstance(data, cls):
        return data
    unknown = data.keys() - known_fields(cls)
    if unknown:
        raise UnknownFieldError(cls, sorted(unknown))
    kwargs = {}
    for name, convert, zero in _plan(cls):
        if name in data:
            kwargs[name] = convert(data[name])
        elif zero is not MISSING:
            kwargs[name] = convert(zero)
    return cls(**kwargs)


class UnknownFieldError(ValueError):
    """`build` was given a key that is a field of no version of the entity: a misspelling."""

    def __init__(self, cls: type, keys: list[str]) -> None:
        super().__init__(
            f"{cls.__module__}.{cls.__qualname__} has no field {', '.join(map(repr, keys))} in "
            f"any version; known fields: {', '.join(sorted(known_fields(cls)))}")
        self.keys = keys


_VERSIONED_MODULE = re.compile(r"(kio\.schema\.\w+)\.v\d+\.(\w+)")


@cache
def known_fields(cls: type) -> frozenset[str]:
    """The field names an entity named like `cls` has in any version of its message.

    kio generates one module per version (`kio.schema.join_group.v5.request`) holding the
    message and its nested entities; siblings are matched by class name. Entities outside that
    layout (zk_era's, with a single version each) know only their own fields.
    """
    own = frozenset(f.name for f in fields(cls))
    match = _VERSIONED_MODULE.fullmatch(cls.__module__)
    if match is None:
        return own
    return own | _fields_by_entity(*match.groups()).get(cls.__name__, frozenset())


@cache
def _fields_by_entity(package: str, kind: str) -> dict[str, frozenset[str]]:
    """Entity class name → union of its field names over every version module of a message."""
    found: dict[str, set[str]] = {}
    for version in pkgutil.iter_modules(importlib.import_module(package).__path__):
        if not re.fullmatch(r"v\d+", version.name):
            continue
        try:
            module = importlib.import_module(f"{package}.{version.name}.{kind}")
        except ImportError:
            continue  # a version of the other kind only (e.g. a request-only schema)
        for value in vars(module).values():
            if isinstance(value, type) and is_dataclass(value) \
                    and value.__module__ == module.__name__:
                found.setdefault(value.__name__, set()).update(f.name for f in fields(value))
    return {name: frozenset(names) for name, names in found.items()}


@cache
def _plan(cls: type) -> tuple[tuple[str, Callable[[Any], Any], Any], ...]:
    """Per field: its name, a converter, and the zero value used when a required one is absent."""
    return tuple((f.name, _converter(f), _zero(f)) for f in fields(cls))


def _zero(f: Any) -> Any:
    if f.default is not MISSING or f.default_factory is not MISSING:
        return MISSING
    kind = classify_field(f)
    if kind.is_array:
        return ()
    if isinstance(kind, EntityField):
        return None if is_optional(f) else {}
    if is_optional(f):
        return None
    return _ZEROS.get(f.metadata.get("kafka_type"), 0)


_ZEROS = {"string": "", "bytes": b"", "records": b"", "bool": False, "float64": 0.0,
          "uuid": uuid.UUID(int=0)}


def _converter(f: Any) -> Callable[[Any], Any]:
    kind = classify_field(f)
    if isinstance(kind, EntityField):
        inner = kind.type_
        return lambda v: build(inner, v)
    if isinstance(kind, EntityTupleField):
        inner = kind.type_
        return lambda v: None if v is None else tuple(build(inner, x) for x in v)
    kafka_type = f.metadata.get("kafka_type")
    scalar = _SCALARS.get(kafka_type)
    if scalar is None:
        return (lambda v: None if v is None else tuple(v)) if kind.is_array else _identity
    if kind.is_array:
        return lambda v: None if v is None else tuple(scalar(x) for x in v)
    return lambda v: None if v is None else scalar(v)


def _identity(v: Any) -> Any:
    return v


def _to_error_code(v: Any) -> ErrorCode:
    """The reference broker passes ErrorCode members (tests/test_typed_errors.py keeps it so);
    ints and Kafka's names ("NOT_COORDINATOR") serve bodies written by hand in tests."""
    if isinstance(v, ErrorCode):
        return v
    if isinstance(v, str):
        try:
            return ErrorCode[v.lower()]
        except KeyError:
            raise ValueError(f"{v!r} is not the name of a Kafka error code") from None
    return ErrorCode(v)


def _to_timedelta(v: Any) -> datetime.timedelta:
    return v if isinstance(v, datetime.timedelta) else datetime.timedelta(milliseconds=v)


def _to_uuid(v: Any) -> uuid.UUID:
    return v if isinstance(v, uuid.UUID) else uuid.UUID(str(v))


def _to_datetime(v: Any) -> datetime.datetime | None:
    if isinstance(v, datetime.datetime):
        return v
    if v < 0:
        return None  # Kafka's -1: no timestamp
    return datetime.datetime.fromtimestamp(v / 1000, tz=datetime.UTC)


_SCALARS: dict[str, Callable[[Any], Any]] = {
    "error_code": _to_error_code,
    "timedelta_i32": _to_timedelta,
    "timedelta_i64": _to_timedelta,
    "uuid": _to_uuid,
    "datetime_i64": _to_datetime,
}


def to_plain(value: Any) -> Any:
    """The inverse of `build`, for tests and logs: entity → dicts/lists/ints/strings."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple):
        return [to_plain(x) for x in value]
    if isinstance(value, ErrorCode):
        return int(value.value)
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return value


def error_code(name: str) -> ErrorCode:
    return ErrorCode[name.lower()]


def field_default(cls: type, name: str) -> Any:
    for f in fields(cls):
        if f.name == name:
            if f.default is not MISSING:
                return f.default
            if f.default_factory is not MISSING:
                return f.default_factory()
    raise KeyError(name)
