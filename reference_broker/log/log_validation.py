"""Checks on record batches a follower copies from its leader, before any byte is written.

The leader validated the producer's batches already; what can still go wrong on the way is
damage (framing, CRC-32C) and a fetch that does not continue this log (offsets going back, as
after a leader change the follower has not truncated for yet). Both raise the Kafka exception
the replica fetcher reacts to; nothing is written, so the log stays as it was.
"""

from __future__ import annotations

from harness.wire.records import MAGIC, BatchHeader, compute_crc, iter_headers
from reference_broker.log.errors import CorruptRecord, UnexpectedAppendOffset


def validate_follower_batches(
    records: bytes | bytearray | memoryview, log_end_offset: int
) -> list[BatchHeader]:
    """The headers of the whole batches in `records` (a partial batch at the end, as fetch
    responses may cut one, is left out). Offsets must not go back from `log_end_offset` nor
    between batches; gaps are allowed, as in Kafka."""
    headers = []
    expected = log_end_offset
    for header in iter_headers(records):
        if header.magic != MAGIC or header.last_offset_delta < 0:
            raise CorruptRecord(f"batch at byte {header.position} has a malformed header")
        if compute_crc(records, header.position, header.size) != header.crc:
            raise CorruptRecord(f"batch at byte {header.position} fails its CRC-32C")
        if header.base_offset < expected:
            raise UnexpectedAppendOffset(
                f"follower batch at offset {header.base_offset} does not follow offset "
                f"{expected - 1} (log end {log_end_offset})",
                header.base_offset,
                log_end_offset,
            )
        expected = header.last_offset + 1
        headers.append(header)
    return headers
