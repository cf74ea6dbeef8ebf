"""Finding data in a log's segments: fetch slices and timestamp lookups (ListOffsets).

Pure functions over the segment list a UnifiedLog owns, kept apart so the log itself is about
changing state (append, roll, truncate, delete) and this module about locating bytes. Nothing
here copies record data except the timestamp lookups, which decode one batch at most.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Sequence

from harness.wire.records import BatchHeader, decode_records
from reference_broker.log.file_records import FetchSlice, FileRegion
from reference_broker.log.segment import LogSegment

EMPTY_SLICE = FetchSlice()

# ListOffsets' special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


def segment_index(bases: Sequence[int], offset: int) -> int:
    """Index of the segment holding `offset` (the first one when it lies before them all)."""
    return max(bisect_right(bases, offset) - 1, 0)


def read_segments(
    segments: Sequence[LogSegment],
    bases: Sequence[int],
    start_offset: int,
    max_bytes: int,
    limit_offset: int,
    min_one_batch: bool,
) -> FetchSlice:
    """Whole batches from the one holding `start_offset`, none reaching `limit_offset`
    (exclusive), at most `max_bytes` unless the first batch alone is bigger and
    `min_one_batch`. The caller has checked `start_offset` against the log's bounds."""
    if start_offset >= limit_offset:
        return EMPTY_SLICE
    regions: list[FileRegion] = []
    remaining = max_bytes
    offset = start_offset
    for i in range(segment_index(bases, start_offset), len(segments)):
        segment = segments[i]
        if limit_offset >= segment.next_offset:
            max_position = segment.size
        else:
            max_position = segment.position_of(limit_offset)
        found = segment.read(offset, remaining, max_position, min_one_batch and not regions)
        if found is not None:
            if found.size == 0:
                break
            regions.append(FileRegion(segment.file, found.position, found.size))
            remaining -= found.size
            if not found.reached_end:
                break
        if limit_offset <= segment.next_offset or remaining <= 0:
            break
        offset = segment.next_offset
    return FetchSlice(tuple(regions)) if regions else EMPTY_SLICE


def fetch_offset_by_timestamp(
    segments: Sequence[LogSegment], log_start_offset: int, log_end_offset: int, timestamp: int
) -> tuple[int, int] | None:
    """ListOffsets: (offset, timestamp) of the first record whose timestamp >= `timestamp`,
    or None when there is none. -2 / -1 / -3 mean earliest / latest / max timestamp and
    answer with timestamp -1 for the first two, as Kafka does."""
    if timestamp == EARLIEST_TIMESTAMP:
        return log_start_offset, -1
    if timestamp == LATEST_TIMESTAMP:
        return log_end_offset, -1
    if timestamp == MAX_TIMESTAMP:
        return max_timestamp_offset(segments, log_start_offset)
    return offset_for_timestamp(segments, log_start_offset, timestamp)


def offset_for_timestamp(
    segments: Sequence[LogSegment], log_start_offset: int, timestamp: int
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record at or after `log_start_offset` whose timestamp
    >= `timestamp`, or None when there is none."""
    for segment in segments:
        if segment.max_timestamp < timestamp or segment.next_offset <= log_start_offset:
            continue
        found = segment.find_by_timestamp(timestamp, log_start_offset)
        if found is not None:
            return first_record_at_or_after(segment, *found, timestamp, log_start_offset)
    return None


def max_timestamp_offset(
    segments: Sequence[LogSegment], log_start_offset: int
) -> tuple[int, int] | None:
    """KIP-734: (offset, timestamp) of the earliest record with the largest timestamp."""
    best: LogSegment | None = None
    for segment in segments:
        if segment.size and (best is None or segment.max_timestamp > best.max_timestamp):
            best = segment
    if best is None:
        return None
    found = best.find_batch(best.offset_of_max_timestamp)
    if found is None:
        return best.offset_of_max_timestamp, best.max_timestamp
    return first_record_at_or_after(best, *found, best.max_timestamp, log_start_offset)


def first_record_at_or_after(
    segment: LogSegment,
    position: int,
    header: BatchHeader,
    timestamp: int,
    log_start_offset: int,
) -> tuple[int, int]:
    """The exact record when the batch can be decoded here (uncompressed, gzip); otherwise
    the batch's base offset and max timestamp, so a consumer seeking there may see a few
    earlier records."""
    try:
        records = decode_records(segment.read_batch(position, header.size))
    except (ValueError, EOFError, OSError, IndexError, struct.error):
        records = []  # undecodable payload: answer at batch granularity
    for record in records:
        if record.offset >= log_start_offset and record.timestamp >= timestamp:
            return record.offset, record.timestamp
    return max(header.base_offset, log_start_offset), header.max_timestamp
