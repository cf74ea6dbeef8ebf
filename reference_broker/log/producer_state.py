"""Idempotent-producer bookkeeping for one partition (Kafka's ProducerStateManager), pure.

For each producer id the leader remembers the current epoch and the last five batches it
appended (Kafka's NUM_BATCHES_TO_RETAIN, matching max.in.flight.requests.per.connection = 5), so
a retried batch is answered with its original offsets instead of being written twice, and a gap
or a zombie producer is refused.

Deliberate simplifications, documented because clients can observe them:
- Entries never expire (Kafka drops them after producer.id.expiration.ms). The log's snapshot
  file carries them across restarts and retention, so a producer whose data was deleted by
  retention is still known and may continue its sequence.
- A producer the partition has never seen must start at sequence 0, otherwise the batch fails
  with OUT_OF_ORDER_SEQUENCE_NUMBER (modern Kafka's answer; the older UNKNOWN_PRODUCER_ID is not
  used). The only way to lose a producer is losing the log itself (truncate fully).
- Transactions are not modelled: batches without a sequence only move the epoch.

The binary snapshot codec lives here as pure functions; file I/O is two small helpers.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from harness.wire.errors import ErrorCode
from harness.wire.records import NO_SEQUENCE, BatchHeader

OUT_OF_ORDER_SEQUENCE_NUMBER = ErrorCode.out_of_order_sequence_number
INVALID_PRODUCER_EPOCH = ErrorCode.invalid_producer_epoch
NUM_BATCHES_TO_RETAIN = 5
_SEQUENCE_MODULUS = 2**31

_SNAPSHOT_VERSION = 1
_SNAPSHOT_HEAD = struct.Struct(">hi")  # version, producer count
_PRODUCER = struct.Struct(">qhb")  # producer id, epoch, batch count
_BATCH = struct.Struct(">iiqqq")  # first seq, last seq, first offset, last offset, append time
_CRC = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """What a retry needs: the sequence range and where the batch landed."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    log_append_time_ms: int = -1


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE


@dataclass(frozen=True, slots=True)
class CheckResult:
    """Verdict on an incoming batch: `error` (a Kafka error code) refuses it; `duplicate` means
    it was already appended and the caller answers with these offsets without writing."""

    error: ErrorCode | None = None
    duplicate: BatchMetadata | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.duplicate is None


ACCEPT = CheckResult()
_OUT_OF_ORDER = CheckResult(error=OUT_OF_ORDER_SEQUENCE_NUMBER)
_FENCED = CheckResult(error=INVALID_PRODUCER_EPOCH)


class ProducerStateManager:
    def __init__(self) -> None:
        self._producers: dict[int, ProducerStateEntry] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def get(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def check(self, header: BatchHeader) -> CheckResult:
        """Judge a leader append from an idempotent producer (producer_id >= 0)."""
        entry = self._producers.get(header.producer_id)
        first_seq = header.base_sequence
        if first_seq < 0:
            return _OUT_OF_ORDER
        if entry is None:
            return ACCEPT if first_seq == 0 else _OUT_OF_ORDER
        if header.producer_epoch < entry.producer_epoch:
            return _FENCED
        if header.producer_epoch > entry.producer_epoch:
            return ACCEPT if first_seq == 0 else _OUT_OF_ORDER
        last_seq = header.last_sequence
        for batch in entry.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return CheckResult(duplicate=batch)
        expected = 0 if not entry.batches else (entry.last_seq + 1) % _SEQUENCE_MODULUS
        return ACCEPT if first_seq == expected else _OUT_OF_ORDER

    def update(
        self,
        header: BatchHeader,
        first_offset: int,
        last_offset: int,
        log_append_time_ms: int = -1,
    ) -> None:
        """Record a batch that is now in the log; a new epoch forgets the old epoch's batches."""
        entry = self._producers.get(header.producer_id)
        if entry is None:
            entry = ProducerStateEntry(header.producer_id, header.producer_epoch)
            self._producers[header.producer_id] = entry
        elif header.producer_epoch != entry.producer_epoch:
            entry.producer_epoch = header.producer_epoch
            entry.batches.clear()
        if header.base_sequence != NO_SEQUENCE:
            entry.batches.append(
                BatchMetadata(
                    header.base_sequence,
                    header.last_sequence,
                    first_offset,
                    last_offset,
                    log_append_time_ms,
                )
            )

    def rebuild_from(self, headers: Iterable[BatchHeader]) -> None:
        """Replay batches read back from the log, in offset order, on top of the current state."""
        for header in headers:
            if header.producer_id >= 0:
                append_time = header.max_timestamp if header.is_log_append_time else -1
                self.update(header, header.base_offset, header.last_offset, append_time)

    def clear(self) -> None:
        self._producers.clear()

    # --- snapshots --------------------------------------------------------------------------

    def to_snapshot(self) -> bytes:
        parts = [_SNAPSHOT_HEAD.pack(_SNAPSHOT_VERSION, len(self._producers))]
        for entry in self._producers.values():
            parts.append(
                _PRODUCER.pack(entry.producer_id, entry.producer_epoch, len(entry.batches))
            )
            parts.extend(
                _BATCH.pack(
                    b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.log_append_time_ms
                )
                for b in entry.batches
            )
        body = b"".join(parts)
        return body + _CRC.pack(crc32c.crc32c(body))

    @classmethod
    def from_snapshot(cls, data: bytes) -> ProducerStateManager:
        """Decode a snapshot; raises ValueError for anything damaged or unknown."""
        if len(data) < _SNAPSHOT_HEAD.size + _CRC.size:
            raise ValueError("producer snapshot is truncated")
        body, (crc,) = data[: -_CRC.size], _CRC.unpack_from(data, len(data) - _CRC.size)
        if crc32c.crc32c(body) != crc:
            raise ValueError("producer snapshot CRC mismatch")
        version, count = _SNAPSHOT_HEAD.unpack_from(body, 0)
        if version != _SNAPSHOT_VERSION:
            raise ValueError(f"unknown producer snapshot version {version}")
        manager = cls()
        pos = _SNAPSHOT_HEAD.size
        try:
            for _ in range(count):
                producer_id, epoch, batches = _PRODUCER.unpack_from(body, pos)
                pos += _PRODUCER.size
                entry = ProducerStateEntry(producer_id, epoch)
                for _ in range(batches):
                    entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                    pos += _BATCH.size
                manager._producers[producer_id] = entry
        except struct.error as exc:
            raise ValueError(f"producer snapshot is malformed: {exc}") from None
        if pos != len(body):
            raise ValueError("producer snapshot has trailing bytes")
        return manager


def write_snapshot_file(path: Path, manager: ProducerStateManager) -> None:
    """Write atomically (temp file, fsync, rename) so a crash leaves the old snapshot or the new."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as out:
        out.write(manager.to_snapshot())
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def read_snapshot_file(path: Path) -> ProducerStateManager:
    return ProducerStateManager.from_snapshot(path.read_bytes())
