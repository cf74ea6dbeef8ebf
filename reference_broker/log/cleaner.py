"""Log compaction for topics with cleanup.policy=compact (Kafka's LogCleaner, in one pass).

A compacted topic is a table: only the latest value of each key matters, and a null value (a
tombstone) deletes the key. The cleaner keeps the log that way without ever changing an offset:

1. Map every key in the cleanable part of the log — all segments but the active one, which
   is still being written — to the offset of its latest record there.
2. Rewrite each cleanable segment keeping a record only if it is that latest record, or has no
   key. A latest record that is a tombstone is kept until it is older than delete.retention.ms
   (by its timestamp), so consumers reading from the start still see the delete.
3. Batches keep their base offset, last offset and producer fields (`rebuild_batch`); a batch
   left with no records disappears; a segment left with nothing is removed.

Batches this module cannot decode (snappy, lz4, zstd, or a payload that does not decode) and
control batches are kept whole and their keys left out of the map — compaction then keeps more
than it could, never less.

Transactions, as Kafka's cleaner treats them: nothing from the first unstable offset on is
cleaned (an open transaction may still abort), and the batches of aborted transactions (from
the transaction index) are removed and their keys left out of the map, so an aborted write never
supersedes a committed one — `__consumer_offsets` depends on it for aborted TxnOffsetCommits.
Markers are kept.

As in Kafka, a log is cleaned only when enough of it is dirty: the bytes of the cleanable
segments at or past the cleaner's checkpoint (what the last cleaning reached) make more than
min.cleanable.dirty.ratio of all cleanable bytes. Kafka cleans on background threads with an
offset map of the dirty part only; here a cleaning re-reads every cleanable segment on the event
loop, which suits the small compacted topics a reference broker holds (`__consumer_offsets`,
test tables).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from harness.wire.records import BatchHeader, Record, decode_records, rebuild_batch
from reference_broker.log.file_records import iter_file_batches
from reference_broker.log.segment import LogSegment
from reference_broker.log.transaction_index import AbortedTxn
from reference_broker.log.unified_log import UnifiedLog

logger = logging.getLogger("reference_broker.log.cleaner")

_DECODABLE = (0, 1)  # uncompressed, gzip


@dataclass(frozen=True)
class CleanResult:
    segments_rewritten: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    bytes_before: int = 0
    bytes_after: int = 0


def is_compacted(log: UnifiedLog) -> bool:
    return "compact" in log.config.cleanup_policy


def clean_logs(logs: Iterable[UnifiedLog], now_ms: int) -> int:
    """One cleaner pass over every compacted log; returns how many segments were rewritten."""
    rewritten = 0
    for log in logs:
        if is_compacted(log):
            rewritten += clean(log, now_ms).segments_rewritten
    return rewritten


def dirty_ratio(log: UnifiedLog) -> float:
    """The share of the cleanable bytes (every segment but the active one) that no cleaning
    has covered yet."""
    cleanable = _cleanable(log)
    total = sum(segment.size for segment in cleanable)
    dirty = sum(segment.size for segment in cleanable
                if segment.next_offset > log.cleaner_checkpoint)
    return dirty / total if total else 0.0


def clean(log: UnifiedLog, now_ms: int) -> CleanResult:
    """Compact the log if its dirty ratio is above min.cleanable.dirty.ratio."""
    cleanable = _cleanable(log)
    ratio = dirty_ratio(log)
    if not cleanable or ratio <= log.config.min_cleanable_dirty_ratio:
        return CleanResult()  # Kafka cleans a log whose ratio is above the minimum, not at it
    log.cleaner_checkpoint = cleanable[-1].next_offset
    aborted = log.collect_aborted_transactions(cleanable[0].base_offset,
                                               cleanable[-1].next_offset)
    latest = _latest_offsets(cleanable, aborted)
    horizon = now_ms - log.config.delete_retention_ms
    rewritten = removed = tombstones = before = after = 0
    for segment in cleanable:
        kept: list[bytes] = []
        changed = False
        for header, batch, records in _batches(segment):
            if is_aborted(header, aborted):
                removed += header.records_count
                changed = True
                continue
            if records is None:
                kept.append(batch)
                continue
            survivors = []
            for record in records:
                if record.key is not None and latest.get(record.key) != record.offset:
                    removed += 1
                elif record.key is not None and record.value is None \
                        and record.timestamp < horizon:
                    tombstones += 1
                else:
                    survivors.append(record)
            if len(survivors) == len(records):
                kept.append(batch)
                continue
            changed = True
            if survivors:
                kept.append(rebuild_batch(header, survivors))
        if changed:
            cleaned = b"".join(kept)
            before += segment.size
            after += len(cleaned)
            log.replace_segment(segment, cleaned)
            rewritten += 1
    if rewritten:
        logger.info("%s: compacted %d segment(s), %d superseded record(s) and %d tombstone(s) "
                    "removed, %d -> %d bytes", log.directory.name, rewritten, removed,
                    tombstones, before, after)
    return CleanResult(rewritten, removed, tombstones, before, after)


def _cleanable(log: UnifiedLog) -> list[LogSegment]:
    """Every segment but the active one, up to the first still-open transaction."""
    first_unstable = log.first_unstable_offset
    return [segment for segment in log.segments[:-1]
            if first_unstable is None or segment.next_offset <= first_unstable]


def is_aborted(header: BatchHeader, aborted: list[AbortedTxn]) -> bool:
    """A data batch of a transaction that was aborted (its producer's, within its range)."""
    return header.is_transactional and not header.is_control and any(
        txn.producer_id == header.producer_id
        and txn.first_offset <= header.base_offset <= txn.last_offset
        for txn in aborted)


def _latest_offsets(segments: list[LogSegment], aborted: list[AbortedTxn]) -> dict[bytes, int]:
    latest: dict[bytes, int] = {}
    for segment in segments:
        for header, _batch, records in _batches(segment):
            if is_aborted(header, aborted):
                continue
            for record in records or ():
                if record.key is not None:
                    latest[record.key] = record.offset
    return latest


def _batches(segment: LogSegment
             ) -> Iterable[tuple[BatchHeader, bytes, list[Record] | None]]:
    """(header, batch bytes, its records — None for a batch that must be kept whole)."""
    for _position, header, body in iter_file_batches(segment.file, 0, segment.size):
        batch = bytes(body)
        yield header, batch, batch_records(header, batch)


def batch_records(header: BatchHeader, batch: bytes) -> list[Record] | None:
    """The records of one batch, or None when it must be kept whole: a control batch, a codec
    decoded nowhere here, or a payload that does not decode. A producer's CRC covers whatever
    it sent and the leader stores batches without decoding them, so the last case happens;
    keeping such a batch, as a snappy one is kept, beats stopping this log's compaction at every
    pass (ci/fuzz found it, docs/fuzzing.md)."""
    if header.is_control or header.compression not in _DECODABLE:
        return None
    try:
        return decode_records(batch)
    except ValueError as exc:
        logger.warning("Keeping an undecodable batch whole: %s", exc)
        return None
