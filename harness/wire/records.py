"""Record batch v2: validate, patch and (for tests and the raw client) build and decode batches.

The broker never re-encodes records: it validates a batch's frame and CRC, then patches the
header fields Kafka lets the leader own (base offset, partition leader epoch, and the max
timestamp when the topic uses LogAppendTime). Those patches touch bytes outside the CRC except
for LogAppendTime, which changes attributes and max timestamp and so recomputes the CRC over the
unchanged record bytes.

Layout of a v2 batch header (61 bytes), offsets from the batch start:
  0 base_offset i64 | 8 batch_length i32 | 12 partition_leader_epoch i32 | 16 magic i8
  17 crc u32 (CRC-32C of bytes 21..end) | 21 attributes i16 | 23 last_offset_delta i32
  27 base_timestamp i64 | 35 max_timestamp i64 | 43 producer_id i64 | 51 producer_epoch i16
  53 base_sequence i32 | 57 records_count i32 | 61 records...
"""

from __future__ import annotations

import gzip
import io
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import crc32c as _crc32c
from kio.serial.errors import DecodeError
from kio.serial.readers import read_signed_varint, read_signed_varlong
from kio.serial.writers import write_signed_varint, write_signed_varlong

from .errors import ErrorCode, error_name

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # base_offset + batch_length: the bytes not counted in batch_length
MAGIC = 2

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

_HEADER = struct.Struct(">qiibIhiqqqhii")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")


class InvalidBatch(ValueError):
    """A batch that cannot be accepted. `error` is the Kafka error code the broker answers with."""

    def __init__(self, error: ErrorCode, reason: str) -> None:
        super().__init__(f"{error_name(error)}: {reason}")
        self.error = error
        self.reason = reason


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fixed header of one batch plus where it sits in the buffer it was read from."""

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (2**31)

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0


def read_header(buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Decode the 61-byte header at `position`; the caller made sure the bytes are there."""
    return BatchHeader(position, *_HEADER.unpack_from(buf, position))


def compute_crc(buf: bytes | bytearray | memoryview, position: int, size: int) -> int:
    return _crc32c.crc32c(memoryview(buf)[position + 21 : position + size])


def iter_headers(buf: bytes | bytearray | memoryview, start: int = 0) -> Iterator[BatchHeader]:
    """Walk the complete batches of `buf` from `start`; stop silently at a partial tail."""
    end = len(buf)
    pos = start
    while pos + HEADER_SIZE <= end:
        header = read_header(buf, pos)
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + header.size > end:
            return
        yield header
        pos += header.size


def validate_batches(
    records: bytes | bytearray | memoryview, max_batch_size: int
) -> list[BatchHeader]:
    """Check a produce request's record set exactly as a leader must before appending it.

    Raises InvalidBatch naming the Kafka error: CORRUPT_MESSAGE for framing or CRC damage,
    UNSUPPORTED_FOR_MESSAGE_FORMAT for magic 0/1, MESSAGE_TOO_LARGE, INVALID_RECORD for a
    batch whose count disagrees with its offset deltas or a request carrying several batches.
    """
    total = len(records)
    if total == 0:
        raise InvalidBatch(ErrorCode.invalid_record, "empty record set")
    headers: list[BatchHeader] = []
    pos = 0
    while pos < total:
        if total - pos < HEADER_SIZE:
            if total - pos >= 17 and records[pos + 16] in (0, 1):
                raise InvalidBatch(ErrorCode.unsupported_for_message_format, "message format v0/v1")
            raise InvalidBatch(ErrorCode.corrupt_message, f"truncated batch header at byte {pos}")
        header = read_header(records, pos)
        if header.magic != MAGIC:
            if header.magic in (0, 1):
                raise InvalidBatch(
                    ErrorCode.unsupported_for_message_format,
                    f"magic {header.magic} is not supported",
                )
            raise InvalidBatch(ErrorCode.corrupt_message, f"unknown magic {header.magic}")
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + header.size > total:
            raise InvalidBatch(
                ErrorCode.corrupt_message,
                f"batch length {header.batch_length} does not fit the {total - pos} bytes left",
            )
        if header.compression not in COMPRESSION_NAMES:
            # Codecs 5-7 do not exist; storing one would hand consumers a batch nobody can
            # read (found by ci/fuzz: decode_records raised KeyError naming it).
            raise InvalidBatch(ErrorCode.corrupt_message,
                               f"unknown compression codec {header.compression}")
        if header.size > max_batch_size:
            raise InvalidBatch(
                ErrorCode.message_too_large,
                f"batch of {header.size} bytes exceeds {max_batch_size}",
            )
        if compute_crc(records, pos, header.size) != header.crc:
            raise InvalidBatch(ErrorCode.corrupt_message, "CRC-32C mismatch")
        if header.records_count <= 0 or header.last_offset_delta != header.records_count - 1:
            raise InvalidBatch(
                ErrorCode.invalid_record,
                f"records count {header.records_count} disagrees with last offset delta "
                f"{header.last_offset_delta}",
            )
        if header.is_control:
            raise InvalidBatch(ErrorCode.invalid_record, "clients may not produce control batches")
        headers.append(header)
        pos += header.size
    if len(headers) != 1:
        raise InvalidBatch(
            ErrorCode.invalid_record, "produce v3+ carries exactly one batch per partition"
        )
    return headers


def patch_base_offset(buf: bytearray | memoryview, position: int, base_offset: int) -> None:
    _I64.pack_into(buf, position, base_offset)


def patch_leader_epoch(buf: bytearray | memoryview, position: int, epoch: int) -> None:
    _I32.pack_into(buf, position + 12, epoch)


def patch_log_append_time(buf: bytearray | memoryview, position: int, timestamp_ms: int) -> None:
    """Stamp LogAppendTime: set the timestamp-type bit and max timestamp, then refresh the CRC."""
    (attributes,) = _I16.unpack_from(buf, position + 21)
    _I16.pack_into(buf, position + 21, attributes | TIMESTAMP_TYPE_BIT)
    _I64.pack_into(buf, position + 35, timestamp_ms)
    (length,) = _I32.unpack_from(buf, position + 8)
    _U32.pack_into(buf, position + 17, compute_crc(buf, position, LOG_OVERHEAD + length))


# --- building and decoding (tests, raw-protocol client, verification tools) -------------------


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def _write_bytes(out: io.BytesIO, data: bytes | None) -> None:
    if data is None:
        write_signed_varint(out, -1)
    else:
        write_signed_varint(out, len(data))
        out.write(data)


def _encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]],
) -> bytes:
    body = io.BytesIO()
    body.write(b"\x00")  # record attributes: unused
    write_signed_varlong(body, timestamp_delta)
    write_signed_varint(body, offset_delta)
    _write_bytes(body, key)
    _write_bytes(body, value)
    write_signed_varint(body, len(headers))
    for name, hvalue in headers:
        _write_bytes(body, name.encode())
        _write_bytes(body, hvalue)
    out = io.BytesIO()
    payload = body.getvalue()
    write_signed_varint(out, len(payload))
    out.write(payload)
    return out.getvalue()


def build_batch(
    values: Sequence[tuple[bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    timestamp_ms: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    compression: int = 0,
    partition_leader_epoch: int = -1,
    transactional: bool = False,
    control: bool = False,
) -> bytes:
    """Encode (key, value) pairs as one v2 batch (compression: 0 none or 1 gzip); a
    ``transactional`` batch has the attribute bit a transactional producer sets (KIP-98), a
    ``control`` batch the bit that marks transaction markers (control_records.py builds those)."""
    encoded = b"".join(
        _encode_record(i, 0, key, value, ()) for i, (key, value) in enumerate(values)
    )
    if compression == 1:
        encoded = gzip.compress(encoded)
    elif compression != 0:
        raise ValueError("build_batch encodes only uncompressed or gzip batches")
    last_delta = len(values) - 1
    tail = (
        struct.pack(
            ">hiqqqhii",
            compression
            | (TRANSACTIONAL_BIT if transactional else 0)
            | (CONTROL_BIT if control else 0),
            last_delta,
            timestamp_ms,
            timestamp_ms,
            producer_id,
            producer_epoch,
            base_sequence,
            len(values),
        )
        + encoded
    )
    crc = _crc32c.crc32c(tail)
    batch_length = 4 + 1 + 4 + len(tail)
    return (
        struct.pack(">qiibI", base_offset, batch_length, partition_leader_epoch, MAGIC, crc) + tail
    )


def rebuild_batch(header: BatchHeader, records: Sequence[Record]) -> bytes:
    """A batch holding a subset of `header`'s records at their original offsets (compaction).

    Everything the batch header says about the producer (id, epoch, base sequence), the leader
    epoch, the attributes and the last offset delta is kept, so offsets, idempotence checks and
    the timestamp type read the same as before; only the records and the max timestamp change.
    Only uncompressed and gzip batches can be rebuilt, as only they can be decoded here.
    """
    if not records:
        raise ValueError("a batch needs at least one record")
    compression = header.compression
    if compression not in (0, 1):
        raise ValueError(f"cannot rebuild a {COMPRESSION_NAMES[compression]} batch")
    log_append_time = header.is_log_append_time
    base_ts = header.base_timestamp
    encoded = b"".join(
        _encode_record(
            r.offset - header.base_offset,
            0 if log_append_time else r.timestamp - base_ts,
            r.key,
            r.value,
            r.headers,
        )
        for r in records
    )
    if compression == 1:
        encoded = gzip.compress(encoded)
    max_ts = header.max_timestamp if log_append_time else max(r.timestamp for r in records)
    tail = (
        struct.pack(
            ">hiqqqhii",
            header.attributes,
            header.last_offset_delta,
            base_ts,
            max_ts,
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            len(records),
        )
        + encoded
    )
    batch_length = 4 + 1 + 4 + len(tail)
    return (
        struct.pack(
            ">qiibI",
            header.base_offset,
            batch_length,
            header.partition_leader_epoch,
            MAGIC,
            _crc32c.crc32c(tail),
        )
        + tail
    )


def _read_nullable(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    length, size = read_signed_varint(buf, pos)
    pos += size
    if length < 0:
        return None, pos
    return bytes(buf[pos : pos + length]), pos + length


class UndecodableRecords(ValueError):
    """A batch whose payload does not decode: damaged gzip data, or records that do not parse.

    A valid CRC only proves the producer sent these bytes, and the broker stores a batch without
    decoding it, so its readers (ListOffsets, the cleaner) must expect this; one ValueError type
    for every cause lets them catch it without knowing which decoder failed (the fuzzer found
    kio's BufferUnderflow and gzip's errors escaping them: docs/fuzzing.md)."""


def decode_records(batch: bytes | bytearray | memoryview) -> list[Record]:
    """Decode every record of an uncompressed or gzip batch, with millisecond timestamps.

    Raises ValueError for a codec it cannot decompress and UndecodableRecords (a ValueError)
    for a payload that does not decode."""
    header = read_header(batch, 0)
    if header.compression not in (0, 1):
        raise ValueError(
            "decode_records cannot decompress "
            f"{COMPRESSION_NAMES.get(header.compression, header.compression)}"
        )
    try:
        return _decode_records(header, batch)
    except UndecodableRecords:
        raise
    except (DecodeError, EOFError, OSError, IndexError, ValueError, zlib.error) as exc:
        raise UndecodableRecords(
            f"batch at offset {header.base_offset}: {type(exc).__name__}: {exc}") from exc


def _decode_records(header: BatchHeader, batch: bytes | bytearray | memoryview) -> list[Record]:
    payload = bytes(memoryview(batch)[HEADER_SIZE : header.size])
    if header.compression == 1:
        payload = gzip.decompress(payload)
    records = []
    pos = 0
    base_ts = header.max_timestamp if header.is_log_append_time else header.base_timestamp
    for _ in range(header.records_count):
        length, size = read_signed_varint(payload, pos)
        pos += size
        end = pos + length
        if length < 0 or end > len(payload):
            # A negative length would re-read the same bytes as the next record, records_count
            # (up to 2^31) times over.
            raise UndecodableRecords(f"record length {length} at byte {pos} of the payload")
        pos += 1  # attributes
        ts_delta, size = read_signed_varlong(payload, pos)
        pos += size
        off_delta, size = read_signed_varint(payload, pos)
        pos += size
        key, pos = _read_nullable(payload, pos)
        value, pos = _read_nullable(payload, pos)
        count, size = read_signed_varint(payload, pos)
        pos += size
        headers = []
        for _h in range(count):
            name, pos = _read_nullable(payload, pos)
            hvalue, pos = _read_nullable(payload, pos)
            headers.append(((name or b"").decode(), hvalue))
        timestamp = base_ts if header.is_log_append_time else base_ts + ts_delta
        records.append(
            Record(header.base_offset + off_delta, timestamp, key, value, tuple(headers))
        )
        pos = end
    return records
