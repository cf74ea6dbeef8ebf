"""`__consumer_offsets` record layouts and the consumer protocol's embedded metadata.

The offsets topic is only meaningful to other tools if its records use Kafka's own layouts: a key
starts with an int16 version (0/1 an offset commit, 2 a group's metadata) and a value with its
own int16 version. kio has no types for these internal records, so they are encoded here by hand
from the published layouts; the broker writes OffsetCommitValue v3 and GroupMetadataValue v3 (the
newest non-flexible versions, what Kafka itself writes; OffsetCommitValue v1 for a commit with
an explicit expiry) and reads every non-flexible version.

The consumer protocol's subscription and assignment blobs (carried opaquely in JoinGroup and
SyncGroup) do have kio types; the broker needs the subscribed topics for OffsetDelete, and tests
need to build and read the blobs like a real consumer would.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field
from typing import Any

from kio.schema.consumer_protocol_assignment.v0.data import (
    ConsumerProtocolAssignment as AssignmentV0,
)
from kio.schema.consumer_protocol_assignment.v1.data import (
    ConsumerProtocolAssignment as AssignmentV1,
)
from kio.schema.consumer_protocol_assignment.v2.data import (
    ConsumerProtocolAssignment as AssignmentV2,
)
from kio.schema.consumer_protocol_assignment.v3.data import (
    ConsumerProtocolAssignment as AssignmentV3,
)
from kio.schema.consumer_protocol_subscription.v0.data import (
    ConsumerProtocolSubscription as SubscriptionV0,
)
from kio.schema.consumer_protocol_subscription.v1.data import (
    ConsumerProtocolSubscription as SubscriptionV1,
)
from kio.schema.consumer_protocol_subscription.v2.data import (
    ConsumerProtocolSubscription as SubscriptionV2,
)
from kio.schema.consumer_protocol_subscription.v3.data import (
    ConsumerProtocolSubscription as SubscriptionV3,
)
from kio.serial import entity_reader, entity_writer

from .protocol import build

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A key or value of the offsets topic that is not in any layout this module reads."""


# --- keys -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    out = io.BytesIO()
    out.write(_I16.pack(OFFSET_COMMIT_KEY_VERSION))
    write_string(out, group)
    write_string(out, topic)
    out.write(_I32.pack(partition))
    return out.getvalue()


def encode_group_key(group: str) -> bytes:
    out = io.BytesIO()
    out.write(_I16.pack(GROUP_METADATA_KEY_VERSION))
    write_string(out, group)
    return out.getvalue()


def decode_key(data: bytes) -> OffsetKey | GroupMetadataKey:
    reader = RecordReader(data)
    version = reader.i16()
    if version in (0, 1):
        return OffsetKey(reader.string(), reader.string(), reader.i32())
    if version == 2:
        return GroupMetadataKey(reader.string())
    raise RecordFormatError(f"unknown __consumer_offsets key version {version}")


# --- offset commit values ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1  # only version 1 carries one


def encode_offset_value(value: OffsetValue) -> bytes:
    """Version 3, or version 1 when the commit carries an explicit expiry (OffsetCommit v2-v4's
    retention time), since only version 1 has a field for it — Kafka makes the same choice."""
    out = io.BytesIO()
    if value.expire_timestamp >= 0:
        out.write(_I16.pack(1))
        out.write(_I64.pack(value.offset))
        write_string(out, value.metadata)
        out.write(_I64.pack(value.commit_timestamp))
        out.write(_I64.pack(value.expire_timestamp))
        return out.getvalue()
    out.write(_I16.pack(OFFSET_COMMIT_VALUE_VERSION))
    out.write(_I64.pack(value.offset))
    out.write(_I32.pack(value.leader_epoch))
    write_string(out, value.metadata)
    out.write(_I64.pack(value.commit_timestamp))
    return out.getvalue()


def decode_offset_value(data: bytes) -> OffsetValue:
    reader = RecordReader(data)
    version = reader.i16()
    if version not in (0, 1, 2, 3):
        raise RecordFormatError(f"unsupported offset commit value version {version}")
    offset = reader.i64()
    leader_epoch = reader.i32() if version == 3 else -1
    metadata = reader.string()
    commit_timestamp = reader.i64()
    expire_timestamp = reader.i64() if version == 1 else -1
    return OffsetValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


# --- group metadata values --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberValue, ...] = field(default=())


def encode_group_value(value: GroupValue) -> bytes:
    out = io.BytesIO()
    out.write(_I16.pack(GROUP_METADATA_VALUE_VERSION))
    write_string(out, value.protocol_type)
    out.write(_I32.pack(value.generation))
    write_string(out, value.protocol)
    write_string(out, value.leader)
    out.write(_I64.pack(value.current_state_timestamp))
    out.write(_I32.pack(len(value.members)))
    for member in value.members:
        write_string(out, member.member_id)
        write_string(out, member.group_instance_id)
        write_string(out, member.client_id)
        write_string(out, member.client_host)
        out.write(_I32.pack(member.rebalance_timeout_ms))
        out.write(_I32.pack(member.session_timeout_ms))
        _write_bytes(out, member.subscription)
        _write_bytes(out, member.assignment)
    return out.getvalue()


def decode_group_value(data: bytes) -> GroupValue:
    reader = RecordReader(data)
    version = reader.i16()
    if version not in (0, 1, 2, 3):
        raise RecordFormatError(f"unsupported group metadata value version {version}")
    protocol_type = reader.string()
    generation = reader.i32()
    protocol = reader.nullable_string()
    leader = reader.nullable_string()
    state_timestamp = reader.i64() if version >= 2 else -1
    members = []
    for _ in range(reader.i32()):
        member_id = reader.string()
        instance_id = reader.nullable_string() if version >= 3 else None
        client_id = reader.string()
        client_host = reader.string()
        rebalance_timeout = reader.i32() if version >= 1 else -1
        session_timeout = reader.i32()
        subscription = reader.bytes_()
        assignment = reader.bytes_()
        members.append(MemberValue(member_id, instance_id, client_id, client_host,
                                   rebalance_timeout if rebalance_timeout >= 0
                                   else session_timeout, session_timeout,
                                   subscription, assignment))
    return GroupValue(protocol_type, generation, protocol, leader, state_timestamp,
                      tuple(members))


# --- the consumer protocol's subscription and assignment --------------------------------------

_SUBSCRIPTIONS = (SubscriptionV0, SubscriptionV1, SubscriptionV2, SubscriptionV3)
_ASSIGNMENTS = (AssignmentV0, AssignmentV1, AssignmentV2, AssignmentV3)


def subscribed_topics(metadata: bytes) -> frozenset[str]:
    """Topics named in a consumer's JoinGroup metadata; newer versions are read as the newest
    known one, whose prefix they extend, as Kafka's consumer does."""
    _version, entity = _read_versioned(_SUBSCRIPTIONS, metadata)
    return frozenset(entity.topics)


def encode_subscription(topics: list[str], version: int = 0) -> bytes:
    return _write_versioned(_SUBSCRIPTIONS, version, {"topics": topics, "user_data": None})


def encode_assignment(partitions: dict[str, list[int]], version: int = 0) -> bytes:
    body = {"assigned_partitions": [{"topic": t, "partitions": p} for t, p in partitions.items()],
            "user_data": None}
    return _write_versioned(_ASSIGNMENTS, version, body)


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    """topic → partitions of a SyncGroup assignment; empty for an empty blob (no partitions)."""
    if not data:
        return {}
    _version, entity = _read_versioned(_ASSIGNMENTS, data)
    return {tp.topic: list(tp.partitions) for tp in entity.assigned_partitions}


def _read_versioned(classes: tuple[type, ...], data: bytes) -> tuple[int, Any]:
    if len(data) < 2:
        raise RecordFormatError("consumer protocol blob shorter than its version")
    (version,) = _I16.unpack_from(data, 0)
    if version < 0:
        raise RecordFormatError(f"negative consumer protocol version {version}")
    cls = classes[min(version, len(classes) - 1)]
    try:
        entity, _size = entity_reader(cls)(data, 2)
    except Exception as exc:  # kio raises assorted errors on short input
        raise RecordFormatError(f"malformed consumer protocol blob: {exc}") from exc
    return version, entity


def _write_versioned(classes: tuple[type, ...], version: int, body: dict[str, Any]) -> bytes:
    cls = classes[version]
    out = io.BytesIO()
    out.write(_I16.pack(version))
    entity_writer(cls)(out, build(cls, body))
    return out.getvalue()


# --- primitives -------------------------------------------------------------------------------


def write_string(out: io.BytesIO, value: str | None) -> None:
    if value is None:
        out.write(_I16.pack(-1))
        return
    encoded = value.encode()
    out.write(_I16.pack(len(encoded)))
    out.write(encoded)


def _write_bytes(out: io.BytesIO, value: bytes) -> None:
    out.write(_I32.pack(len(value)))
    out.write(value)


class RecordReader:
    """Kafka's non-flexible primitives from a byte string; shared with `txn_records`."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def _take(self, size: int) -> bytes:
        end = self._pos + size
        if size < 0 or end > len(self._data):
            raise RecordFormatError("truncated internal-topic record")
        chunk = self._data[self._pos:end]
        self._pos = end
        return chunk

    def i8(self) -> int:
        return _I8.unpack(self._take(1))[0]

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def nullable_string(self) -> str | None:
        length = self.i16()
        return None if length < 0 else self._take(length).decode()

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise RecordFormatError("null where a string is required")
        return value

    def bytes_(self) -> bytes:
        length = self.i32()
        return b"" if length < 0 else self._take(length)
