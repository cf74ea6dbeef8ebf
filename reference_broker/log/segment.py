"""One log segment: `<20-digit base offset>.log` plus its offset, time and transaction indexes.

Modelled on Kafka's LogSegment. Batches are stored byte for byte; the segment only reads their
61-byte headers (os.pread) to find positions, and reads whole batches only to verify CRCs during
recovery. Appends are one os.write on an O_APPEND descriptor plus O(1) index bookkeeping.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from harness.wire.records import HEADER_SIZE, MAGIC, BatchHeader, compute_crc, read_header
from reference_broker.log.checkpoint_file import fsync_directory
from reference_broker.log.errors import CorruptIndex
from reference_broker.log.file_records import (
    SegmentFile,
    iter_file_batches,
    iter_file_headers,
)
from reference_broker.log.index import OffsetIndex, TimeIndex
from reference_broker.log.log_config import LogConfig
from reference_broker.log.transaction_index import TXN_INDEX_SUFFIX, TransactionIndex

logger = logging.getLogger("reference_broker.log")

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
INT32_MAX = 2**31 - 1
_REBUILD_SCAN_CHUNK = 256 * 1024

_Index = TypeVar("_Index", OffsetIndex, TimeIndex)


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass(frozen=True, slots=True)
class SegmentRead:
    """Where a read landed: `size` bytes of whole batches from `position`. A size of 0 means
    the first batch is out of bounds, so the fetch must stop here; `reached_end` means the read
    took everything the segment holds, so the fetch may go on into the next segment."""

    position: int
    size: int
    reached_end: bool


class LogSegment:
    """A contiguous run of batches and the indexes that locate them.

    Build one with `create` (a new, empty segment) or `open` followed by exactly one of
    `load_trusted` (flushed data: check the indexes, scan only the tail) or `recover`
    (unflushed data: verify every batch, cut off a torn tail, rebuild the indexes).
    """

    def __init__(
        self, directory: Path, base_offset: int, config: LogConfig, now_ms: int, *, create: bool
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = config.index_interval_bytes
        self.created_ms = now_ms
        self.file = SegmentFile(
            directory / segment_file_name(base_offset, LOG_SUFFIX), create=create
        )
        self._size = 0 if create else self.file.disk_size()
        self._next_offset = base_offset
        self._max_timestamp = -1
        self._offset_of_max_timestamp = base_offset
        self._bytes_since_last_index_entry = 0
        self._first_batch_timestamp: int | None = None  # None: not read yet
        self._unflushed = False
        self._indexes_usable = True
        index_path = directory / segment_file_name(base_offset, INDEX_SUFFIX)
        time_index_path = directory / segment_file_name(base_offset, TIME_INDEX_SUFFIX)
        if not create and self._size and not (index_path.exists() and time_index_path.exists()):
            self._indexes_usable = False
        self.offset_index = self._open_index(OffsetIndex, index_path, config, create)
        self.time_index = self._open_index(TimeIndex, time_index_path, config, create)
        # Aborted transactions whose marker is here; the log keeps it (this class cannot
        # rebuild it: an entry's first offset comes from the producer state).
        self.txn_index = TransactionIndex(directory / segment_file_name(base_offset,
                                                                        TXN_INDEX_SUFFIX))
        if create:
            self.txn_index.delete()  # a leftover of an older segment at this offset

    def _open_index(
        self, kind: type[_Index], path: Path, config: LogConfig, create: bool
    ) -> _Index:
        try:
            return kind(path, self.base_offset, config.max_index_size, create=create)
        except CorruptIndex as exc:
            logger.warning("%s; rebuilding it", exc)
            self._indexes_usable = False
            return kind(path, self.base_offset, config.max_index_size, create=True)

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int
    ) -> LogSegment:
        return cls(directory, base_offset, config, now_ms, create=True)

    @classmethod
    def open(cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int) -> LogSegment:
        return cls(directory, base_offset, config, now_ms, create=False)

    # --- state ------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        return self._size

    @property
    def next_offset(self) -> int:
        """One past the last offset stored here (the base offset when empty)."""
        return self._next_offset

    @property
    def max_timestamp(self) -> int:
        return self._max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        """Base offset of the first batch that reached max_timestamp."""
        return self._offset_of_max_timestamp

    @property
    def largest_timestamp(self) -> int:
        """What retention compares: the max record timestamp, else the file's mtime (Kafka)."""
        if self._max_timestamp >= 0:
            return self._max_timestamp
        return self.file.mtime_ms()

    @property
    def log_path(self) -> Path:
        return self.file.path

    def should_roll(
        self, config: LogConfig, batch_size: int, max_timestamp: int, last_offset: int, now_ms: int
    ) -> bool:
        """Kafka's roll rule: never for an empty segment; else when the batch would overflow the
        size, the segment is older than segment.ms, an index is full, or offsets would not fit
        the indexes' 32-bit relative offsets."""
        if self._size == 0:
            return False
        return (
            self._size + batch_size > config.segment_bytes
            or self._time_waited_for_roll(now_ms, max_timestamp) > config.segment_ms
            or self.offset_index.is_full
            or self.time_index.is_full
            or last_offset - self.base_offset > INT32_MAX
        )

    def _time_waited_for_roll(self, now_ms: int, max_timestamp: int) -> int:
        """Like Kafka: measured in record time from the first batch's max timestamp when it has
        one, so rolling follows the data and survives restarts; else wall time since creation."""
        if self._first_batch_timestamp is None and self._size >= HEADER_SIZE:
            self._first_batch_timestamp = read_header(self.file.pread(HEADER_SIZE, 0)).max_timestamp
        if self._first_batch_timestamp is not None and self._first_batch_timestamp >= 0:
            return max_timestamp - self._first_batch_timestamp
        return now_ms - self.created_ms

    # --- appending --------------------------------------------------------------------------

    def append_batch(
        self,
        data: bytes | bytearray | memoryview,
        base_offset: int,
        last_offset: int,
        max_timestamp: int,
    ) -> None:
        """Append one batch whose header already carries its final offsets."""
        position = self._size
        self._write(data)
        if position == 0:
            self._first_batch_timestamp = max_timestamp
        self._account_batch(position, base_offset, len(data), max_timestamp)
        self._next_offset = last_offset + 1

    def append_batches(
        self, data: bytes | bytearray | memoryview, headers: list[tuple[int, BatchHeader]]
    ) -> None:
        """Append consecutive batches in one write; `headers` pairs each batch's position in
        `data` with its header (replication: offsets and timestamps are already final)."""
        start = self._size
        self._write(data)
        for position, header in headers:
            if start + position == 0:
                self._first_batch_timestamp = header.max_timestamp
            self._account_batch(
                start + position, header.base_offset, header.size, header.max_timestamp
            )
        self._next_offset = headers[-1][1].last_offset + 1

    def _write(self, data: bytes | bytearray | memoryview) -> None:
        """Write or leave the file as it was: a failed write must not strand half a batch."""
        position = self._size
        try:
            self.file.write(data)
        except OSError:
            self.file.truncate(position)
            raise
        self._size = position + len(data)
        self._unflushed = True

    def _account_batch(
        self, position: int, base_offset: int, size: int, max_timestamp: int
    ) -> None:
        if max_timestamp > self._max_timestamp:
            self._max_timestamp = max_timestamp
            self._offset_of_max_timestamp = base_offset
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(base_offset, position)
            self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += size

    def seal(self) -> None:
        """Record the final max timestamp in the time index (on roll and close, as Kafka does),
        so a reopened segment knows its largest timestamp without scanning."""
        if self._size:
            self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)

    # --- reading ----------------------------------------------------------------------------

    def translate_offset(self, offset: int) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset >= `offset`, None if none."""
        if offset >= self._next_offset:
            return None
        _, position = self.offset_index.lookup(offset)
        for batch_position, header in iter_file_headers(self.file, position, self._size):
            if header.last_offset >= offset:
                return batch_position, header
        return None

    def position_of(self, offset: int) -> int:
        """Where the batch holding `offset` (or the next one) starts; the size if none."""
        found = self.translate_offset(offset)
        return self._size if found is None else found[0]

    def read(
        self, start_offset: int, max_size: int, max_position: int, min_one_batch: bool
    ) -> SegmentRead | None:
        """Whole batches from the one holding `start_offset`, ending at or before both
        `max_position` (a batch boundary: the high watermark's) and `max_size` bytes, except
        that `min_one_batch` lets the first batch exceed `max_size`. None when the segment
        holds nothing at or after `start_offset`."""
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        position, header = found
        max_position = min(max_position, self._size)
        first_end = position + header.size
        limit = min(max_position, position + max(max_size, 0))
        if first_end > max_position or (first_end > limit and not min_one_batch):
            return SegmentRead(position, 0, False)
        if first_end > limit:
            end = first_end
        elif limit == max_position:
            end = max_position
        else:
            end = self._batch_boundary_at_or_before(limit, position)
        return SegmentRead(position, end - position, end == self._size)

    def _batch_boundary_at_or_before(self, limit: int, start: int) -> int:
        _, indexed = self.offset_index.lookup_by_position(limit)
        end = max(indexed, start)
        for position, header in iter_file_headers(self.file, end, limit):
            end = position + header.size
        return end

    def find_by_timestamp(
        self, timestamp: int, start_offset: int
    ) -> tuple[int, BatchHeader] | None:
        """The first batch at or after `start_offset` whose max timestamp >= `timestamp`."""
        _, indexed_offset = self.time_index.lookup(timestamp)
        _, position = self.offset_index.lookup(max(indexed_offset, start_offset))
        for batch_position, header in iter_file_headers(self.file, position, self._size):
            if header.max_timestamp >= timestamp and header.last_offset >= start_offset:
                return batch_position, header
        return None

    def find_batch(self, base_offset: int) -> tuple[int, BatchHeader] | None:
        found = self.translate_offset(base_offset)
        if found is None or found[1].base_offset != base_offset:
            return None
        return found

    def read_batch(self, position: int, size: int) -> bytes:
        return self.file.pread(size, position)

    def iter_headers(self, start_offset: int) -> Iterator[BatchHeader]:
        """Headers of the batches whose base offset >= `start_offset`, in order."""
        for _, header in self.iter_positioned_headers(start_offset):
            yield header

    def iter_positioned_headers(self, start_offset: int) -> Iterator[tuple[int, BatchHeader]]:
        """(file position, header) of the batches whose base offset >= `start_offset`."""
        _, position = self.offset_index.lookup(start_offset)
        for batch_position, header in iter_file_headers(
            self.file, position, self._size, _REBUILD_SCAN_CHUNK
        ):
            if header.base_offset >= start_offset:
                yield batch_position, header

    # --- loading and recovery ---------------------------------------------------------------

    def load_trusted(self) -> int:
        """Load a flushed segment cheaply; falls back to a rebuild, then to recovery, when the
        files disagree. Returns the bytes cut off (0 unless the segment was damaged)."""
        if self._indexes_usable:
            try:
                self._load_tail()
                return 0
            except CorruptIndex as exc:
                logger.warning("%s; rebuilding the indexes of %s", exc, self.log_path)
        if self._rebuild(verify_crc=False) == self._size:
            return 0
        logger.warning("%s does not end on a batch boundary; recovering it", self.log_path)
        return self.recover()

    def recover(self) -> int:
        """Verify every batch (length, magic, CRC-32C, increasing offsets), cut the file at the
        first bad one and rebuild both indexes. Returns the number of bytes cut off."""
        valid_end = self._rebuild(verify_crc=True)
        truncated = self._size - valid_end
        if truncated:
            self.file.truncate(valid_end)
            self._size = valid_end
            self._unflushed = True
        return truncated

    def _rebuild(self, *, verify_crc: bool) -> int:
        """Re-derive indexes and state from the batches; returns where valid batches end."""
        self.offset_index.clear()
        self.time_index.clear()
        self._next_offset = self.base_offset
        self._max_timestamp = -1
        self._offset_of_max_timestamp = self.base_offset
        self._bytes_since_last_index_entry = 0
        self._first_batch_timestamp = None
        batches: Iterator[tuple[int, BatchHeader, memoryview | None]]
        if verify_crc:
            batches = iter_file_batches(self.file, 0, self._size)
        else:
            batches = (
                (position, header, None)
                for position, header in iter_file_headers(
                    self.file, 0, self._size, _REBUILD_SCAN_CHUNK
                )
            )
        valid_end = 0
        for position, header, body in batches:
            if not self._plausible(header, self._next_offset):
                break
            if body is not None and compute_crc(body, 0, header.size) != header.crc:
                break
            if position == 0:
                self._first_batch_timestamp = header.max_timestamp
            self._account_batch(position, header.base_offset, header.size, header.max_timestamp)
            self._next_offset = header.last_offset + 1
            valid_end = position + header.size
        self.offset_index.write_pending()
        self.time_index.write_pending()
        self._indexes_usable = True
        return valid_end

    def _plausible(self, header: BatchHeader, expected_offset: int) -> bool:
        return (
            header.magic == MAGIC
            and header.base_offset >= expected_offset
            and header.last_offset_delta >= 0
            and header.last_offset - self.base_offset <= INT32_MAX
        )

    def _load_tail(self) -> None:
        """Trust the indexes up to their last entry and scan only the batches after it.

        Raises CorruptIndex when the entries are out of bounds, the last one does not point at
        its batch, the batches do not end exactly at the end of the file, or the tail is longer
        than the index interval allows (an index file cut short).
        """
        self.offset_index.sanity_check(self._size)
        indexed_offset, position = self.offset_index.last_entry()
        last_time_entry = self.time_index.last_entry()
        max_timestamp, offset_of_max = last_time_entry or (-1, self.base_offset)
        next_offset = indexed_offset
        end = position
        last_size = 0
        for batch_position, header in iter_file_headers(self.file, position, self._size):
            if batch_position == position and header.base_offset != indexed_offset:
                raise CorruptIndex(f"{self.offset_index.path}: last entry misses its batch")
            if not self._plausible(header, next_offset):
                raise CorruptIndex(f"{self.log_path}: implausible batch at byte {batch_position}")
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = header.max_timestamp, header.base_offset
            next_offset = header.last_offset + 1
            end = batch_position + header.size
            last_size = header.size
        if end != self._size:
            raise CorruptIndex(f"{self.log_path}: batches end at byte {end} of {self._size}")
        if end - position > self.index_interval_bytes + last_size:
            raise CorruptIndex(f"{self.offset_index.path}: ends before the last indexed batch")
        self.time_index.sanity_check(next_offset)
        self._next_offset = next_offset
        self._max_timestamp = max_timestamp
        self._offset_of_max_timestamp = offset_of_max
        self._bytes_since_last_index_entry = end - position

    # --- maintenance ------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Cut off every batch whose last offset >= `offset` (the whole batch holding
        `offset`, since batches are never split). Returns the bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position, header = found
        self.txn_index.truncate_to(header.base_offset)
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to_offset(header.base_offset)
        removed = self._size - position
        self.file.truncate(position)
        self._size = position
        self._unflushed = True
        if position == 0:
            self._first_batch_timestamp = None
        try:
            self._load_tail()
        except CorruptIndex:
            self._rebuild(verify_crc=False)
        return removed

    def swap_in_cleaned(self, cleaned: bytes, config: LogConfig, now_ms: int) -> LogSegment:
        """Replace this sealed segment's bytes by `cleaned` (compaction); returns the segment
        opened on the new file, whose indexes are rebuilt and fsynced.

        The bytes are written and fsynced as `<base>.log.cleaned`, the old indexes removed, and
        one rename puts the new file in place: a crash leaves either the old segment or the new
        one (whose missing indexes the next load rebuilds); a stray `.cleaned` file is removed
        on load. Fetches already holding regions of the old file keep reading it.
        """
        log_path = self.log_path
        staged = log_path.with_name(log_path.name + ".cleaned")
        with open(staged, "wb") as out:
            out.write(cleaned)
            out.flush()
            os.fsync(out.fileno())
        self.offset_index.delete()
        self.time_index.delete()
        os.replace(staged, log_path)
        fsync_directory(self.directory)
        replacement = LogSegment.open(self.directory, self.base_offset, config, now_ms)
        replacement.load_trusted()
        replacement.seal()
        replacement.flush()
        return replacement

    def flush(self) -> None:
        if self._unflushed:
            self.file.fsync()
            self._unflushed = False
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        self.offset_index.close()
        self.time_index.close()
        self.file.close()

    def delete(self) -> None:
        """Unlink the files. The .log descriptor is left open on purpose: fetch regions may still
        point into it, and it closes when the last of them is dropped (see SegmentFile)."""
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        self.file.path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return (
            f"LogSegment(base_offset={self.base_offset}, next_offset={self._next_offset}, "
            f"size={self._size})"
        )
