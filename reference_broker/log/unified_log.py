"""One partition's log: an ordered list of segments under `<log_dir>/<topic>-<partition>/`.

Modelled on Kafka's UnifiedLog. The leader path (`append_as_leader`) is O(1) Python work per
batch: a producer-state check, a few header patches, one os.write, O(1) index bookkeeping. Reads
return file regions for sendfile, never copies.

Kafka behaviours kept on purpose: the batch holding the fetch offset is returned whole even if it
starts earlier; the high watermark is a hard bound, the byte limit a soft one (one batch always
goes out when `min_one_batch`); a segment rolls on size, on segment.ms measured from its first
batch's timestamp, on a full index; rolled segments are fsynced at once so a crash only has to
recover the active segment; retention deletes whole segments, oldest first, never the active one.

Leader epochs (KIP-101) are tracked in the partition's LeaderEpochFileCache: a leader append
records its epoch at the batch's first offset, a follower append records the epochs the leader
stamped into its batches, and every truncation cuts the cache with the log.

Reading and timestamp lookups live in log_read.py, the retention decision in log_retention.py,
follower batch checks in log_validation.py, loading and recovery in log_loader.py.

Not thread-safe: one thread (the broker's event loop) drives a log, as nothing here blocks for
long except fsync, which the caller may move to an executor by calling `flush` there while it
holds off other calls on the same log.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from harness.wire.control_records import EndTxnMarker, build_marker_batch
from harness.wire.errors import ErrorCode
from harness.wire.records import (
    BatchHeader,
    patch_base_offset,
    patch_leader_epoch,
    patch_log_append_time,
    read_header,
)
from reference_broker.log import log_read
from reference_broker.log.checkpoint_file import fsync_directory
from reference_broker.log.errors import OffsetOutOfRange
from reference_broker.log.file_records import FetchSlice
from reference_broker.log.leader_epoch_cache import LeaderEpochFileCache
from reference_broker.log.log_config import Clock, LogConfig, wall_clock_ms
from reference_broker.log.log_loader import (
    LoadedLog,
    delete_snapshots,
    load_log,
    load_producer_state,
    read_marker,
    record_aborts,
    take_snapshot,
)
from reference_broker.log.log_read import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from reference_broker.log.log_retention import deletable_prefix
from reference_broker.log.log_validation import validate_follower_batches
from reference_broker.log.producer_state import AppendOrigin, ProducerStateManager
from reference_broker.log.segment import INT32_MAX, LogSegment
from reference_broker.log.topic_partition import TopicPartition, parse_topic_partition
from reference_broker.log.transaction_index import AbortedTxn, collect_aborted

logger = logging.getLogger("reference_broker.log")

# Re-exported: callers import these from here.
__all__ = ["EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "MAX_TIMESTAMP", "AppendResult",
           "OffsetOutOfRange", "UnifiedLog"]


@dataclass(frozen=True, slots=True)
class AppendResult:
    """What a produce response needs. `duplicate`: a retry of a batch already in the log, whose
    original offsets are returned and nothing was written. `error`: a Kafka error code; nothing
    was written and the offsets are -1. `log_append_time_ms` is -1 for CreateTime topics."""

    first_offset: int
    last_offset: int
    log_append_time_ms: int
    log_start_offset: int
    duplicate: bool = False
    error: ErrorCode | None = None


class UnifiedLog:
    """Build with `UnifiedLog.open`; the constructor takes an already loaded directory."""

    def __init__(
        self, directory: Path, config: LogConfig, loaded: LoadedLog, now_ms: Clock
    ) -> None:
        self.directory = directory
        self.topic_partition: TopicPartition = parse_topic_partition(directory.name)
        self._config = config
        self._now_ms = now_ms
        self._segments = loaded.segments
        self._bases = [segment.base_offset for segment in self._segments]
        self._log_start_offset = loaded.log_start_offset
        self._log_end_offset = self._segments[-1].next_offset
        self._recovery_point = loaded.recovery_point
        self._producer_state = loaded.producer_state
        self._leader_epoch_cache = loaded.leader_epoch_cache
        self._last_flush_ms = now_ms()
        self._dir_needs_fsync = True
        self._closed = False
        # The cleaner's checkpoint (Kafka's cleaner-offset-checkpoint, kept in memory): offsets
        # below it have been compacted. A restarted broker counts the whole log as dirty, as
        # Kafka does when the checkpoint has no entry for a log.
        self.cleaner_checkpoint = loaded.log_start_offset

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        had_clean_shutdown: bool = False,
        now_ms: Clock = wall_clock_ms,
    ) -> UnifiedLog:
        """Load (creating if needed) the partition directory, recovering unflushed segments.

        `recovery_point` and `log_start_offset` come from the log dir's checkpoint files;
        `had_clean_shutdown` (the log dir's clean-shutdown marker) trusts every segment.
        """
        parse_topic_partition(directory.name)  # refuse a bad name before touching the disk
        loaded = load_log(
            directory,
            config,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            had_clean_shutdown=had_clean_shutdown,
            now_ms=now_ms(),
        )
        return cls(directory, config, loaded, now_ms)

    # --- state ------------------------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets."""
        return self._log_end_offset

    @property
    def recovery_point(self) -> int:
        """Every offset below this is fsynced."""
        return self._recovery_point

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def producer_state(self) -> ProducerStateManager:
        return self._producer_state

    @property
    def leader_epoch_cache(self) -> LeaderEpochFileCache:
        return self._leader_epoch_cache

    @property
    def latest_epoch(self) -> int | None:
        """The newest leader epoch this log knows of (None before any was recorded)."""
        return self._leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (epoch, end offset) as LeaderEpochFileCache.end_offset_for
        answers it against this log's end; (-1, -1) when unknown."""
        return self._leader_epoch_cache.end_offset_for(epoch, self._log_end_offset)

    def update_config(self, config: LogConfig) -> None:
        """Apply AlterConfigs: sizes and times take effect at the next append/roll/cleanup."""
        self._config = config
        self._segments[-1].index_interval_bytes = config.index_interval_bytes

    # --- appending --------------------------------------------------------------------------

    def append_as_leader(
        self,
        records: bytearray,
        header: BatchHeader,
        *,
        leader_epoch: int,
        now_ms: int | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> AppendResult:
        """Append one validated batch (`header` read from `records` at header.position); a
        coordinator's batch (`origin`) is held to its producer's epoch, not its sequence.

        Assigns offsets from the log end, stamps the leader epoch (and LogAppendTime when the
        topic uses it) into `records` in place, then writes it unchanged otherwise.
        """
        config = self._config
        size = header.size
        if size > config.max_message_bytes:
            return self._refused(ErrorCode.message_too_large)
        if size > config.segment_bytes:
            # Kafka's RecordBatchTooLargeException, whose error is RECORD_LIST_TOO_LARGE.
            return self._refused(ErrorCode.record_list_too_large)
        idempotent = header.producer_id >= 0
        if idempotent:
            verdict = self._producer_state.check(header, origin)
            if verdict.duplicate is not None:
                original = verdict.duplicate
                return AppendResult(
                    original.first_offset,
                    original.last_offset,
                    original.log_append_time_ms,
                    self._log_start_offset,
                    duplicate=True,
                )
            if verdict.error is not None:
                return self._refused(verdict.error)
        now = self._now_ms() if now_ms is None else now_ms
        base_offset, last_offset, append_time = self._write_as_leader(
            records, header, leader_epoch, now
        )
        if idempotent:
            self._producer_state.update(header, base_offset, last_offset, append_time)
        self._maybe_flush()
        return AppendResult(base_offset, last_offset, append_time, self._log_start_offset)

    def append_marker_as_leader(
        self,
        marker: EndTxnMarker,
        *,
        producer_id: int,
        producer_epoch: int,
        leader_epoch: int,
        now_ms: int | None = None,
    ) -> AppendResult:
        """Write the control batch ending `producer_id`'s transaction (WriteTxnMarkers).

        Refused with INVALID_PRODUCER_EPOCH for an older producer epoch and
        TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch; an abort is indexed in
        the active segment's transaction index, with the last stable offset of that moment."""
        error = self._producer_state.check_marker(
            producer_id, producer_epoch, marker.coordinator_epoch
        )
        if error is not None:
            return self._refused(error)
        now = self._now_ms() if now_ms is None else now_ms
        records = bytearray(build_marker_batch(
            marker, producer_id=producer_id, producer_epoch=producer_epoch, timestamp_ms=now
        ))
        header = read_header(records, 0)
        base_offset, last_offset, append_time = self._write_as_leader(
            records, header, leader_epoch, now
        )
        completed = self._producer_state.complete(
            producer_id, producer_epoch, marker, base_offset, header.max_timestamp)
        record_aborts(self._segments[-1], [completed])
        self._maybe_flush()
        return AppendResult(base_offset, last_offset, append_time, self._log_start_offset)

    def _write_as_leader(
        self, records: bytearray, header: BatchHeader, leader_epoch: int, now: int
    ) -> tuple[int, int, int]:
        """Assign offsets, stamp the epoch (and LogAppendTime), write, rolling first if due.
        Returns (base offset, last offset, log append time or -1)."""
        config = self._config
        size = header.size
        position = header.position
        base_offset = self._log_end_offset
        last_offset = base_offset + header.last_offset_delta
        patch_base_offset(records, position, base_offset)
        patch_leader_epoch(records, position, leader_epoch)
        if config.log_append_time:
            patch_log_append_time(records, position, now)
            append_time = max_timestamp = now
        else:
            append_time, max_timestamp = -1, header.max_timestamp
        self._leader_epoch_cache.assign(leader_epoch, base_offset)  # file written only on change
        segment = self._segments[-1]
        if segment.should_roll(config, size, max_timestamp, last_offset, now):
            segment = self._roll(base_offset, now)
        whole = position == 0 and len(records) == size
        data = records if whole else memoryview(records)[position : position + size]
        segment.append_batch(data, base_offset, last_offset, max_timestamp)
        self._log_end_offset = last_offset + 1
        return base_offset, last_offset, append_time

    def _maybe_flush(self) -> None:
        if self._log_end_offset - self._recovery_point >= self._config.flush_interval_messages:
            self.flush()

    def _refused(self, error: ErrorCode) -> AppendResult:
        return AppendResult(-1, -1, -1, self._log_start_offset, error=error)

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendResult | None:
        """Append batches copied from the leader byte for byte: offsets, leader epochs and
        timestamps stay the leader's. A partial batch at the end (fetch responses may cut one)
        is ignored. Offsets must not go backwards from the log end; gaps are allowed, as in
        Kafka. Returns None when there was no whole batch.

        The epochs are recorded before the data is written (so the checkpoint is never behind
        the log), and producer state follows each written run, so the snapshot a roll takes
        covers every batch below the new segment."""
        headers = validate_follower_batches(records, self._log_end_offset)
        if not headers:
            return None
        self._leader_epoch_cache.assign_batches(headers)
        now = self._now_ms()
        view = memoryview(records)
        i = 0
        while i < len(headers):
            first = headers[i]
            segment = self._segments[-1]
            if segment.should_roll(
                self._config, first.size, first.max_timestamp, first.last_offset, now
            ):
                segment = self._roll(first.base_offset, now)
            j, run_bytes = i + 1, first.size
            while (
                j < len(headers)
                and segment.size + run_bytes + headers[j].size <= self._config.segment_bytes
                and headers[j].last_offset - segment.base_offset <= INT32_MAX
            ):
                run_bytes += headers[j].size
                j += 1
            start = first.position
            segment.append_batches(
                view[start : start + run_bytes],
                [(header.position - start, header) for header in headers[i:j]],
            )
            self._log_end_offset = headers[j - 1].last_offset + 1
            completed = self._producer_state.rebuild_from(
                (header, read_marker(records, header.position, header) if header.is_control
                 else None)
                for header in headers[i:j]
            )
            record_aborts(segment, completed)
            i = j
        self._maybe_flush()
        return AppendResult(
            headers[0].base_offset, headers[-1].last_offset, -1, self._log_start_offset
        )

    # --- transactions -----------------------------------------------------------------------

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest transaction still open here (None: none open)."""
        return self._producer_state.first_unstable_offset()

    def last_stable_offset(self, high_watermark: int) -> int:
        """What read_committed consumers may read below: the first unstable offset, bounded
        by the high watermark (Kafka's UnifiedLog.lastStableOffset)."""
        first_unstable = self._producer_state.first_unstable_offset()
        return high_watermark if first_unstable is None else min(first_unstable, high_watermark)

    def collect_aborted_transactions(
        self, start_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """The aborted transactions with records in [start_offset, upper_bound_offset), oldest
        marker first: only segments from the one holding `start_offset` can index them, since
        a marker comes after its transaction's records."""
        first = log_read.segment_index(self._bases, max(start_offset, self._bases[0]))
        return collect_aborted(
            (segment.txn_index.entries for segment in self._segments[first:]),
            start_offset,
            upper_bound_offset,
        )

    # --- reading ----------------------------------------------------------------------------

    def read(
        self, start_offset: int, max_bytes: int, max_offset: int, min_one_batch: bool = True
    ) -> FetchSlice:
        """Whole batches from the one holding `start_offset`, none reaching `max_offset` (the
        high watermark, exclusive), at most `max_bytes` unless the first batch alone is bigger
        and `min_one_batch`. An empty slice means nothing to send yet. Raises OffsetOutOfRange
        outside [log start, log end]."""
        log_end = self._log_end_offset
        if start_offset < self._log_start_offset or start_offset > log_end:
            raise OffsetOutOfRange(start_offset, self._log_start_offset, log_end)
        limit = min(max_offset, log_end)
        return log_read.read_segments(
            self._segments, self._bases, start_offset, max_bytes, limit, min_one_batch
        )

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """ListOffsets: (offset, timestamp) of the first record whose timestamp >= `timestamp`,
        or None when there is none. -2 / -1 / -3 mean earliest / latest / max timestamp and
        answer with timestamp -1 for the first two, as Kafka does. Batches this module cannot
        decompress (snappy, lz4, zstd) are answered at batch granularity (see log_read).
        """
        return log_read.fetch_offset_by_timestamp(
            self._segments, self._log_start_offset, self._log_end_offset, timestamp
        )

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """KIP-734: (offset, timestamp) of the earliest record with the largest timestamp."""
        return log_read.max_timestamp_offset(self._segments, self._log_start_offset)

    # --- flushing and rolling ---------------------------------------------------------------

    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync every segment holding offsets in [recovery point, up_to_offset) and advance the
        recovery point there (default: the log end)."""
        offset = (
            self._log_end_offset
            if up_to_offset is None
            else min(up_to_offset, self._log_end_offset)
        )
        if offset > self._recovery_point:
            segments = self._segments
            first = log_read.segment_index(self._bases, self._recovery_point)
            for i in range(first, len(segments)):
                if segments[i].base_offset >= offset:
                    break
                segments[i].flush()
            self._recovery_point = offset
        if self._dir_needs_fsync:
            fsync_directory(self.directory)
            self._dir_needs_fsync = False
        self._last_flush_ms = self._now_ms()

    def flush_due(self, now_ms: int) -> bool:
        """flush.ms: unflushed data has waited long enough (never when flush.ms is unset)."""
        interval = self._config.flush_interval_ms
        return (
            interval is not None
            and self._log_end_offset > self._recovery_point
            and now_ms - self._last_flush_ms >= interval
        )

    def roll(self, now_ms: int | None = None) -> LogSegment:
        """Start a new active segment at the log end (no-op when the active one is empty)."""
        return self._roll(self._log_end_offset, self._now_ms() if now_ms is None else now_ms)

    def _roll(self, base_offset: int, now_ms: int) -> LogSegment:
        active = self._segments[-1]
        if active.size == 0:
            if active.base_offset == base_offset:
                return active
            active.delete()
            self._segments.pop()
        else:
            active.seal()
        segment = LogSegment.create(self.directory, base_offset, self._config, now_ms)
        self._segments.append(segment)
        self._bases = [s.base_offset for s in self._segments]
        self._dir_needs_fsync = True
        # Flushed first: a snapshot on disk then vouches for every segment (and transaction
        # index) below it, which is what the loader's replay from it relies on.
        self.flush(base_offset)
        take_snapshot(self.directory, base_offset, self._producer_state)
        return segment

    # --- compaction -------------------------------------------------------------------------

    def replace_segment(self, segment: LogSegment, cleaned: bytes) -> None:
        """Swap a non-active segment for its compacted bytes (the log cleaner's last step),
        crash-safely (see LogSegment.swap_in_cleaned). An empty result removes the segment: its
        offsets are then a gap that reads skip."""
        index = self._segments.index(segment)
        if index == len(self._segments) - 1:
            raise ValueError("the active segment is never compacted")
        if not cleaned:
            segment.delete()
            del self._segments[index]
        else:
            self._segments[index] = segment.swap_in_cleaned(cleaned, self._config, self._now_ms())
        self._bases = [s.base_offset for s in self._segments]
        self._dir_needs_fsync = True

    # --- retention and truncation -----------------------------------------------------------

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Apply retention.ms (a segment's largest timestamp is too old), retention.bytes (the log
        is too big without it) and the log start offset (a segment lies wholly below it), oldest
        first, never the active segment. Returns how many segments were deleted."""
        now = self._now_ms() if now_ms is None else now_ms
        count = deletable_prefix(self._segments, self._config, self._log_start_offset, now)
        if count == 0:
            return 0
        deleted, self._segments = self._segments[:count], self._segments[count:]
        self._bases = [s.base_offset for s in self._segments]
        self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
        self._recovery_point = max(self._recovery_point, self._log_start_offset)
        self._leader_epoch_cache.truncate_from_start(self._log_start_offset)
        for segment in deleted:
            segment.delete()
        self._dir_needs_fsync = True
        logger.info(
            "%s: deleted %d segment(s) by retention; log start offset is now %d",
            self.directory.name,
            count,
            self._log_start_offset,
        )
        return count

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Move the log start up to `offset` (capped at the log end): DeleteRecords, or a
        follower following its leader's log start. Offsets below it become unreadable at once;
        the segments wholly below it go at the next `delete_old_segments`. Returns whether the
        log start moved."""
        offset = min(offset, self._log_end_offset)
        if offset <= self._log_start_offset:
            return False
        self._log_start_offset = offset
        self._recovery_point = max(self._recovery_point, offset)
        self._leader_epoch_cache.truncate_from_start(offset)
        return True

    def truncate_to(self, offset: int) -> bool:
        """Follower truncation: drop everything from `offset` on. Batches are never split, so if
        `offset` falls inside a batch that batch goes too and the log end lands on its base.
        The indexes, producer state (last snapshot at or below the new end plus a replay) and
        leader epochs are cut back with the data. Returns whether anything was removed."""
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self._log_end_offset:
            return False
        if offset < self._log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        keep = [segment for segment in self._segments if segment.base_offset <= offset]
        for segment in self._segments[len(keep) :]:
            segment.delete()
        self._segments = keep
        self._bases = [s.base_offset for s in keep]
        keep[-1].truncate_to(offset)
        self._log_end_offset = keep[-1].next_offset
        self._recovery_point = min(self._recovery_point, self._log_end_offset)
        self._dir_needs_fsync = True
        delete_snapshots(self.directory, above=self._log_end_offset)
        self._producer_state = load_producer_state(self.directory, keep, self._log_end_offset)
        self._leader_epoch_cache.truncate_from_end(self._log_end_offset)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and continue at `offset` (a follower too far behind the leader)."""
        if offset < 0:
            raise ValueError(f"cannot start a log at negative offset {offset}")
        for segment in self._segments:
            segment.delete()
        delete_snapshots(self.directory)
        self._segments = [LogSegment.create(self.directory, offset, self._config, self._now_ms())]
        self._bases = [offset]
        self._log_start_offset = self._log_end_offset = self._recovery_point = offset
        self._producer_state = ProducerStateManager()
        self._leader_epoch_cache.clear_and_flush()
        self._dir_needs_fsync = True

    # --- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Flush everything and snapshot producer state so the next start needs no recovery."""
        if self._closed:
            return
        self._segments[-1].seal()
        for segment in self._segments:
            segment.flush()
        self.flush()
        take_snapshot(self.directory, self._log_end_offset, self._producer_state)
        for segment in self._segments:
            segment.close()
        self._closed = True

    def delete(self) -> None:
        """Remove the partition directory (DeleteTopics).

        The directory is renamed to `<name>.<random>-delete` first, so a crash midway leaves
        something the next start-up removes instead of a half-deleted log it would load. Fetches
        already holding regions of the log can still send them: the descriptors stay open until
        those regions are dropped.
        """
        trash = self.directory.with_name(f"{self.directory.name}.{uuid.uuid4().hex}-delete")
        self.directory.rename(trash)
        fsync_directory(trash.parent)
        for segment in self._segments:
            segment.delete()  # the paths are gone already; this closes the index files
        shutil.rmtree(trash, ignore_errors=True)
        self._closed = True

    def __repr__(self) -> str:
        return (
            f"UnifiedLog({self.directory.name}, start={self._log_start_offset}, "
            f"end={self._log_end_offset}, segments={len(self._segments)})"
        )

