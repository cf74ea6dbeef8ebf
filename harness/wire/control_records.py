"""Transaction markers: the one record of a control batch that ends a transaction (KIP-98).

A partition learns that a producer's transaction ended only from its log: the coordinator has
the partition leader append a control batch (attributes bits 4 and 5 set) holding one record
whose key says COMMIT or ABORT and whose value carries the coordinator epoch that wrote it. The
broker needs the codec to write markers and, on replay or replication, to read them back;
clients skip these batches. Pure: bytes in, values out.

Layout (Kafka's EndTransactionMarker and ControlRecordType):
  key   = version int16 (0) | type int16 (0 abort, 1 commit)
  value = version int16 (0) | coordinator epoch int32
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from .records import (
    HEADER_SIZE,
    BatchHeader,
    UndecodableRecords,
    build_batch,
    decode_records,
)

CONTROL_RECORD_VERSION = 0
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlType(IntEnum):
    """The control record types that end a transaction (Kafka has others, not markers)."""

    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    """What one marker says: how the transaction ended and which coordinator epoch said so."""

    control_type: ControlType
    coordinator_epoch: int

    @property
    def is_abort(self) -> bool:
        return self.control_type is ControlType.ABORT


class InvalidControlRecord(ValueError):
    """A control batch whose record is not a transaction marker this codec knows."""


def encode_marker(marker: EndTxnMarker) -> tuple[bytes, bytes]:
    """(key, value) of the marker's record."""
    return (
        _KEY.pack(CONTROL_RECORD_VERSION, marker.control_type),
        _VALUE.pack(CONTROL_RECORD_VERSION, marker.coordinator_epoch),
    )


def decode_marker(key: bytes | None, value: bytes | None) -> EndTxnMarker:
    """Read a marker record; later versions are read by their version-0 prefix, as Kafka does."""
    if key is None or len(key) < _KEY.size or value is None or len(value) < _VALUE.size:
        raise InvalidControlRecord("a transaction marker needs a 4-byte key and a 6-byte value")
    _, type_id = _KEY.unpack_from(key)
    try:
        control_type = ControlType(type_id)
    except ValueError:
        raise InvalidControlRecord(f"control record type {type_id} is not a marker") from None
    _, coordinator_epoch = _VALUE.unpack_from(value)
    return EndTxnMarker(control_type, coordinator_epoch)


def build_marker_batch(
    marker: EndTxnMarker,
    *,
    producer_id: int,
    producer_epoch: int,
    timestamp_ms: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A control batch of one marker record for the producer, as a leader appends it."""
    return build_batch(
        [encode_marker(marker)], transactional=True, control=True,
        producer_id=producer_id, producer_epoch=producer_epoch, timestamp_ms=timestamp_ms,
        base_offset=base_offset, partition_leader_epoch=partition_leader_epoch,
    )


def marker_of(batch: bytes | bytearray | memoryview, header: BatchHeader) -> EndTxnMarker:
    """The marker of the control batch `header` describes, read from `batch` at its position.

    Raises InvalidControlRecord when the batch holds no readable marker."""
    view = memoryview(batch)[header.position : header.position + header.size]
    if len(view) < HEADER_SIZE:
        raise InvalidControlRecord("control batch is truncated")
    try:
        records = decode_records(view)
    except (UndecodableRecords, ValueError) as exc:
        raise InvalidControlRecord(f"control batch does not decode: {exc}") from None
    if not records:
        raise InvalidControlRecord("control batch holds no record")
    return decode_marker(records[0].key, records[0].value)
