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

Transactions (KIP-98), as Kafka's ProducerStateManager keeps them: a transactional batch opens
the producer's ongoing transaction at its first offset, and the control batch holding its
COMMIT or ABORT marker ends it, yielding a CompletedTxn. The earliest first offset of the
ongoing transactions is the partition's first unstable offset, which holds the last stable
offset back; the log appends aborted ones to its transaction index. Each producer also keeps
the coordinator epoch of its last marker, so a marker from a deposed coordinator is refused.

The binary snapshot codec lives here as pure functions; file I/O is two small helpers. Version 2
carries each producer's ongoing transaction and coordinator epoch (a kill -9 in the middle of a
transaction must not forget it); version 3 also its last batch's timestamp, which
DescribeProducers answers (KIP-664) as Kafka's snapshot keeps it. Versions 1 (written before
transactions existed here, read with no transaction open) and 2 are still read, with no
timestamp known (-1).
"""

from __future__ import annotations

import os
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import crc32c

from harness.wire.control_records import EndTxnMarker
from harness.wire.errors import ErrorCode
from harness.wire.records import NO_SEQUENCE, BatchHeader


class AppendOrigin(Enum):
    """Who wrote a leader append: a client's Produce, or a coordinator writing on a producer's
    behalf into its internal topic (a TxnOffsetCommit's batch), which carries no sequence."""

    CLIENT = "client"
    COORDINATOR = "coordinator"


OUT_OF_ORDER_SEQUENCE_NUMBER = ErrorCode.out_of_order_sequence_number
INVALID_PRODUCER_EPOCH = ErrorCode.invalid_producer_epoch
INVALID_TXN_STATE = ErrorCode.invalid_txn_state
TRANSACTION_COORDINATOR_FENCED = ErrorCode.transaction_coordinator_fenced
NUM_BATCHES_TO_RETAIN = 5
NO_OFFSET = -1
NO_COORDINATOR_EPOCH = -1
_SEQUENCE_MODULUS = 2**31

_SNAPSHOT_VERSION = 3
_SNAPSHOT_V1 = 1
_SNAPSHOT_V2 = 2
_SNAPSHOT_HEAD = struct.Struct(">hi")  # version, producer count
_PRODUCER_V1 = struct.Struct(">qhb")  # producer id, epoch, batch count
# producer id, epoch, coordinator epoch, ongoing transaction's first offset, batch count
_PRODUCER_V2 = struct.Struct(">qhiqb")
# the same and the last batch's timestamp
_PRODUCER = struct.Struct(">qhiqbq")
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


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker ended: its offsets (the last is the marker's own), how it ended,
    and the partition's last stable offset at that moment, which the transaction index keeps
    so a reader knows how far one index entry's view reaches (Kafka's AbortedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool
    last_stable_offset: int


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    current_txn_first_offset: int = NO_OFFSET  # NO_OFFSET: no transaction ongoing
    last_timestamp: int = -1  # the last data batch's max timestamp (DescribeProducers)

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
_NOT_TRANSACTIONAL = CheckResult(error=INVALID_TXN_STATE)


class ProducerStateManager:
    def __init__(self) -> None:
        self._producers: dict[int, ProducerStateEntry] = {}
        self._ongoing: dict[int, int] = {}  # producer id -> first offset of its transaction

    def __len__(self) -> int:
        return len(self._producers)

    def active_producers(self) -> list[ProducerStateEntry]:
        """Every producer the partition remembers, as DescribeProducers lists them (KIP-664)."""
        return list(self._producers.values())

    def get(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def check(self, header: BatchHeader, origin: AppendOrigin = AppendOrigin.CLIENT
              ) -> CheckResult:
        """Judge a leader append from an idempotent producer (producer_id >= 0)."""
        if origin is AppendOrigin.COORDINATOR:
            return self._check_epoch(header)
        verdict = self._check_sequence(header)
        entry = self._producers.get(header.producer_id)
        if verdict.ok and not header.is_transactional and entry is not None \
                and entry.current_txn_first_offset != NO_OFFSET:
            # Kafka: a producer inside a transaction writes only transactional batches, whatever
            # its epoch (the transaction outlives an epoch bump until its marker).
            return _NOT_TRANSACTIONAL
        return verdict

    def _check_epoch(self, header: BatchHeader) -> CheckResult:
        """A coordinator's batch (a TxnOffsetCommit written for a producer) has no sequence:
        only a producer epoch older than the partition's is refused (Kafka's
        AppendOrigin.Coordinator skips the sequence checks)."""
        entry = self._producers.get(header.producer_id)
        if entry is not None and header.producer_epoch < entry.producer_epoch:
            return _FENCED
        return ACCEPT

    def _check_sequence(self, header: BatchHeader) -> CheckResult:
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
        """Record a data batch that is now in the log; a new epoch forgets the old epoch's
        batches, and a transactional batch opens the producer's transaction if none is open."""
        entry = self._entry_at_epoch(header.producer_id, header.producer_epoch)
        entry.last_timestamp = header.max_timestamp
        if header.is_transactional and entry.current_txn_first_offset == NO_OFFSET:
            entry.current_txn_first_offset = first_offset
            self._ongoing[header.producer_id] = first_offset
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

    def _entry_at_epoch(self, producer_id: int, producer_epoch: int) -> ProducerStateEntry:
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = ProducerStateEntry(producer_id, producer_epoch)
            self._producers[producer_id] = entry
        elif producer_epoch != entry.producer_epoch:
            entry.producer_epoch = producer_epoch
            entry.batches.clear()
        return entry

    # --- transactions -----------------------------------------------------------------------

    def check_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int
    ) -> ErrorCode | None:
        """Judge a marker before the leader writes it (Kafka's appendEndTxnMarker checks): an
        older producer epoch is a zombie's transaction, an older coordinator epoch a deposed
        coordinator. A newer producer epoch is accepted: the coordinator bumps it on abort."""
        entry = self._producers.get(producer_id)
        if entry is None:
            return None
        if producer_epoch < entry.producer_epoch:
            return INVALID_PRODUCER_EPOCH
        if coordinator_epoch < entry.coordinator_epoch:
            return TRANSACTION_COORDINATOR_FENCED
        return None

    def complete(
        self, producer_id: int, producer_epoch: int, marker: EndTxnMarker, offset: int,
        timestamp: int = -1,
    ) -> CompletedTxn:
        """Record the marker written at `offset`: the producer's transaction (from its first
        offset, or from the marker itself when none was open, as in Kafka) ends there. The
        marker's batch `timestamp` becomes the producer's last, as Kafka's
        appendEndTxnMarker keeps it (measured: DescribeProducers on Kafka 3.9 then answers the
        marker's time, not the last data batch's)."""
        entry = self._entry_at_epoch(producer_id, producer_epoch)
        entry.last_timestamp = timestamp
        first_offset = entry.current_txn_first_offset
        if first_offset == NO_OFFSET:
            first_offset = offset
        others = [o for pid, o in self._ongoing.items() if pid != producer_id]
        completed = CompletedTxn(
            producer_id,
            first_offset,
            offset,
            marker.is_abort,
            min(others) if others else offset + 1,
        )
        entry.current_txn_first_offset = NO_OFFSET
        entry.coordinator_epoch = marker.coordinator_epoch
        self._ongoing.pop(producer_id, None)
        return completed

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest ongoing transaction, None when none is open."""
        return min(self._ongoing.values()) if self._ongoing else None

    def ongoing_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of each ongoing transaction (a copy)."""
        return dict(self._ongoing)

    # --- replay -----------------------------------------------------------------------------

    def rebuild_from(
        self, batches: Iterable[tuple[BatchHeader, EndTxnMarker | None]]
    ) -> list[CompletedTxn]:
        """Replay batches read back from the log, in offset order, on top of the current state:
        each with its marker when it is a control batch (None otherwise, or when its marker
        is unreadable, which then ends nothing). Returns the transactions the markers ended."""
        completed = []
        for header, marker in batches:
            if header.producer_id < 0:
                continue
            if header.is_control:
                if marker is not None:
                    completed.append(self.complete(
                        header.producer_id, header.producer_epoch, marker, header.base_offset,
                        header.max_timestamp))
                continue
            append_time = header.max_timestamp if header.is_log_append_time else -1
            self.update(header, header.base_offset, header.last_offset, append_time)
        return completed

    def clear(self) -> None:
        self._producers.clear()
        self._ongoing.clear()

    # --- snapshots --------------------------------------------------------------------------

    def to_snapshot(self) -> bytes:
        parts = [_SNAPSHOT_HEAD.pack(_SNAPSHOT_VERSION, len(self._producers))]
        for entry in self._producers.values():
            parts.append(
                _PRODUCER.pack(
                    entry.producer_id,
                    entry.producer_epoch,
                    entry.coordinator_epoch,
                    entry.current_txn_first_offset,
                    len(entry.batches),
                    entry.last_timestamp,
                )
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
        if version not in (_SNAPSHOT_V1, _SNAPSHOT_V2, _SNAPSHOT_VERSION):
            raise ValueError(f"unknown producer snapshot version {version}")
        manager = cls()
        pos = _SNAPSHOT_HEAD.size
        try:
            for _ in range(count):
                last_timestamp = -1
                if version == _SNAPSHOT_V1:
                    producer_id, epoch, batches = _PRODUCER_V1.unpack_from(body, pos)
                    coordinator_epoch, txn_first_offset = NO_COORDINATOR_EPOCH, NO_OFFSET
                    pos += _PRODUCER_V1.size
                elif version == _SNAPSHOT_V2:
                    producer_id, epoch, coordinator_epoch, txn_first_offset, batches = (
                        _PRODUCER_V2.unpack_from(body, pos)
                    )
                    pos += _PRODUCER_V2.size
                else:
                    (producer_id, epoch, coordinator_epoch, txn_first_offset, batches,
                     last_timestamp) = _PRODUCER.unpack_from(body, pos)
                    pos += _PRODUCER.size
                entry = ProducerStateEntry(
                    producer_id,
                    epoch,
                    coordinator_epoch=coordinator_epoch,
                    current_txn_first_offset=txn_first_offset,
                    last_timestamp=last_timestamp,
                )
                for _ in range(batches):
                    entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                    pos += _BATCH.size
                manager._producers[producer_id] = entry
                if txn_first_offset != NO_OFFSET:
                    manager._ongoing[producer_id] = txn_first_offset
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
