"""Record-set helpers of the protocol suite: split a fetched record set into its records.

A Fetch answer's ``records`` field holds any number of whole v2 batches, possibly followed by a
partial one (Kafka may cut the last batch at ``max_bytes``); the suite checks offsets, values
and timestamps record by record, so it decodes them all here, with millisecond timestamps
(kio's own record helpers truncate timestamps to seconds).
"""

from __future__ import annotations

from harness.wire.records import BatchHeader, Record, decode_records, iter_headers


def batch_headers(records: bytes | None) -> list[BatchHeader]:
    """The headers of every complete batch in a fetched record set (None counts as empty)."""
    return list(iter_headers(records or b""))


def fetched_records(records: bytes | None) -> list[Record]:
    """Every record of every complete batch in a fetched record set, in log order."""
    data = records or b""
    return [record for header in iter_headers(data)
            for record in decode_records(data[header.position:header.position + header.size])]


def values(records: bytes | None) -> list[bytes | None]:
    return [record.value for record in fetched_records(records)]
