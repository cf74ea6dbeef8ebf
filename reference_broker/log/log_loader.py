"""Turn a partition directory back into segments and producer state (Kafka's LogLoader).

Segments wholly below the recovery point were fsynced, so they are trusted: their indexes are
sanity-checked and only the batches after the last index entry are scanned. Every other segment
is recovered batch by batch. After a clean shutdown every segment is trusted. Where recovery cuts
a torn or corrupt tail, every later segment is dropped too: their offsets would no longer follow.

Producer state comes from the newest readable snapshot at or below the log end offset, plus a
replay of the batch headers after it (and of the markers of the control batches, which end
transactions); snapshots are taken at every roll and at close. The same replay rebuilds the
segments' transaction indexes: entries for markers at or after the snapshot are dropped and
appended again as the replay meets the aborts, so a crash that lost or tore the end of an index
leaves it whole, and one that kept entries the log lost leaves no stray entry.

The leader epoch checkpoint is written before the data it describes, so after a crash it is cut
back to the log end. When it is missing, unreadable, or misses the epoch of the last batch on
disk, it is rebuilt from the batch headers (each carries its partition leader epoch).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from harness.wire.control_records import EndTxnMarker, InvalidControlRecord, marker_of
from harness.wire.records import BatchHeader, read_header
from reference_broker.log.leader_epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from reference_broker.log.log_config import LogConfig
from reference_broker.log.producer_state import (
    CompletedTxn,
    ProducerStateManager,
    read_snapshot_file,
    write_snapshot_file,
)
from reference_broker.log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    segment_file_name,
)
from reference_broker.log.transaction_index import TXN_INDEX_SUFFIX, AbortedTxn

logger = logging.getLogger("reference_broker.log")

SNAPSHOT_SUFFIX = ".snapshot"
# Leftovers of interrupted deletes, compactions, swaps and atomic writes: never live data.
STRAY_SUFFIXES = (".deleted", ".cleaned", ".swap", ".tmp")
SNAPSHOTS_TO_KEEP = 2
_INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


@dataclass(slots=True)
class LoadedLog:
    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int
    producer_state: ProducerStateManager
    leader_epoch_cache: LeaderEpochFileCache


def load_log(
    directory: Path,
    config: LogConfig,
    *,
    recovery_point: int,
    log_start_offset: int,
    had_clean_shutdown: bool,
    now_ms: int,
) -> LoadedLog:
    directory.mkdir(parents=True, exist_ok=True)
    _remove_stray_files(directory)
    bases = _offsets_with_suffix(directory, LOG_SUFFIX)
    _remove_orphan_indexes(directory, set(bases))
    segments: list[LogSegment] = []
    for i, base in enumerate(bases):
        if segments and segments[-1].next_offset > base:
            logger.warning(
                "%s: segment %d overlaps segment %d; cutting the older one",
                directory,
                segments[-1].base_offset,
                base,
            )
            segments[-1].truncate_to(base)
        segment = LogSegment.open(directory, base, config, now_ms)
        next_base = bases[i + 1] if i + 1 < len(bases) else None
        trusted = had_clean_shutdown or (next_base is not None and next_base <= recovery_point)
        truncated = segment.load_trusted() if trusted else segment.recover()
        segments.append(segment)
        if truncated:
            logger.warning(
                "%s: truncated %d bytes of torn or corrupt data from segment %d; the log now "
                "ends at offset %d",
                directory,
                truncated,
                base,
                segment.next_offset,
            )
            for later in bases[i + 1 :]:
                logger.warning("%s: deleting segment %d after the truncation", directory, later)
                for suffix in (LOG_SUFFIX, *_INDEX_SUFFIXES):
                    (directory / segment_file_name(later, suffix)).unlink(missing_ok=True)
            break
    if not segments:
        segments.append(LogSegment.create(directory, max(log_start_offset, 0), config, now_ms))
    log_end_offset = segments[-1].next_offset
    log_start_offset = min(max(log_start_offset, segments[0].base_offset), log_end_offset)
    return LoadedLog(
        segments=segments,
        log_start_offset=log_start_offset,
        recovery_point=log_end_offset
        if had_clean_shutdown
        else min(recovery_point, log_end_offset),
        producer_state=load_producer_state(directory, segments, log_end_offset),
        leader_epoch_cache=load_leader_epoch_cache(
            directory, segments, log_start_offset, log_end_offset
        ),
    )


def load_leader_epoch_cache(
    directory: Path, segments: list[LogSegment], log_start_offset: int, log_end_offset: int
) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache(directory / LEADER_EPOCH_CHECKPOINT)
    if not cache.needs_rebuild:
        cache.truncate_from_end(log_end_offset)
        last_epoch = _last_batch_epoch(segments)
        latest = -1 if cache.latest_epoch is None else cache.latest_epoch
        if last_epoch > latest:
            logger.warning(
                "%s: the last batch has leader epoch %d but the checkpoint ends at epoch %d; "
                "rebuilding it from the log",
                cache.path, last_epoch, latest,
            )
            cache.needs_rebuild = True
    if cache.needs_rebuild:
        if log_end_offset > segments[0].base_offset:
            logger.info("%s: rebuilding the leader epoch cache from the log", directory)
        rebuild_leader_epoch_cache(cache, segments)
    cache.truncate_from_start(log_start_offset)
    return cache


def rebuild_leader_epoch_cache(cache: LeaderEpochFileCache, segments: list[LogSegment]) -> None:
    """Replace the cache's entries by the epochs the batches on disk were written in."""
    cache.rebuild(
        (header.partition_leader_epoch, header.base_offset)
        for segment in segments
        for header in segment.iter_headers(segment.base_offset)
    )


def _last_batch_epoch(segments: list[LogSegment]) -> int:
    for segment in reversed(segments):
        if segment.size:
            found = segment.translate_offset(segment.next_offset - 1)
            if found is not None:
                return found[1].partition_leader_epoch
    return -1


def load_producer_state(
    directory: Path, segments: list[LogSegment], log_end_offset: int
) -> ProducerStateManager:
    """Newest usable snapshot at or below the log end, then replay the batches after it,
    rebuilding the transaction indexes of the replayed range."""
    state: ProducerStateManager | None = None
    replay_from = segments[0].base_offset
    for offset in reversed(_offsets_with_suffix(directory, SNAPSHOT_SUFFIX)):
        path = snapshot_path(directory, offset)
        if offset > log_end_offset:
            path.unlink(missing_ok=True)  # describes batches the log no longer has
            continue
        try:
            state = read_snapshot_file(path)
        except (OSError, ValueError) as exc:
            logger.warning("%s: discarding unreadable producer snapshot: %s", path, exc)
            path.unlink(missing_ok=True)
            continue
        replay_from = offset
        break
    if state is None:
        state = ProducerStateManager()
    for segment in segments:
        if segment.next_offset > replay_from:
            segment.txn_index.truncate_to(replay_from)
            completed = state.rebuild_from(
                (header, read_marker(segment.read_batch(position, header.size), 0, header))
                if header.is_control else (header, None)
                for position, header in segment.iter_positioned_headers(replay_from)
            )
            record_aborts(segment, completed)
    return state


def read_marker(
    batch: bytes | bytearray | memoryview, position: int, header: BatchHeader
) -> EndTxnMarker | None:
    """The marker of the control batch at `position` of `batch`; None (logged) when it holds
    none: such a batch then ends no transaction, as Kafka ignores unknown control records."""
    try:
        return marker_of(batch, read_header(batch, position))
    except InvalidControlRecord as exc:
        logger.warning("control batch at offset %d is not a marker: %s", header.base_offset, exc)
        return None


def record_aborts(segment: LogSegment, completed: list[CompletedTxn]) -> None:
    """Index the aborted ones of `completed`, whose markers are in `segment`."""
    for txn in completed:
        if txn.is_aborted:
            segment.txn_index.append(AbortedTxn(
                txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset))


def take_snapshot(directory: Path, offset: int, state: ProducerStateManager) -> None:
    """Snapshot the state covering every batch below `offset`; keep only the newest few."""
    write_snapshot_file(snapshot_path(directory, offset), state)
    for old in _offsets_with_suffix(directory, SNAPSHOT_SUFFIX)[:-SNAPSHOTS_TO_KEEP]:
        snapshot_path(directory, old).unlink(missing_ok=True)


def delete_snapshots(directory: Path, *, above: int = -1) -> None:
    for offset in _offsets_with_suffix(directory, SNAPSHOT_SUFFIX):
        if offset > above:
            snapshot_path(directory, offset).unlink(missing_ok=True)


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / segment_file_name(offset, SNAPSHOT_SUFFIX)


def _offsets_with_suffix(directory: Path, suffix: str) -> list[int]:
    """Sorted base offsets of the `<20 digits><suffix>` files; other names are not ours."""
    offsets = []
    for path in directory.iterdir():
        stem = path.name[: -len(suffix)] if path.name.endswith(suffix) else ""
        if len(stem) == 20 and stem.isdigit() and stem.isascii():
            offsets.append(int(stem))
    return sorted(offsets)


def _remove_stray_files(directory: Path) -> None:
    for path in directory.iterdir():
        if path.is_file() and path.name.endswith(STRAY_SUFFIXES):
            logger.info("%s: removing leftover file %s", directory, path.name)
            path.unlink(missing_ok=True)


def _remove_orphan_indexes(directory: Path, bases: set[int]) -> None:
    for suffix in _INDEX_SUFFIXES:
        for offset in _offsets_with_suffix(directory, suffix):
            if offset not in bases:
                logger.info("%s: removing index without a segment: %d%s", directory, offset, suffix)
                (directory / segment_file_name(offset, suffix)).unlink(missing_ok=True)
