"""A segment's aborted-transaction index, `<base offset>.txnindex` (Kafka's TransactionIndex).

A read_committed consumer must drop the records of aborted transactions, which it can only do
if the fetch response lists them: so each segment keeps an entry for every transaction whose
ABORT marker it holds. Without the index a fetch would have to scan the log back from the
fetch offset for markers. Aborts are rare, so the entries are kept in memory too and the file
is only written on an append (opened per append: no descriptor to leak or swap on compaction)
and fsynced with the segment.

An entry is Kafka's AbortedTxn, 34 bytes: version int16 (0), producer id int64, first offset
int64, last offset int64 (the marker's), last stable offset int64 (when the abort completed).
The file is created on the first entry; a segment without aborts has none. Pure parts (the
codec and the search) are functions, the class adds the file.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger("reference_broker.log")

TXN_INDEX_SUFFIX = ".txnindex"
ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def encode_entries(entries: Iterable[AbortedTxn]) -> bytes:
    return b"".join(
        _ENTRY.pack(
            ABORTED_TXN_VERSION, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset
        )
        for e in entries
    )


def decode_entries(data: bytes) -> tuple[list[AbortedTxn], int]:
    """The whole entries of `data` and how many bytes they take; a torn tail (a crash in the
    middle of an append) and anything from an unknown version on are left out."""
    entries = []
    pos = 0
    while pos + ENTRY_SIZE <= len(data):
        version, producer_id, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != ABORTED_TXN_VERSION:
            break
        entries.append(AbortedTxn(producer_id, first, last, lso))
        pos += ENTRY_SIZE
    return entries, pos


def overlapping(
    entries: Sequence[AbortedTxn], fetch_offset: int, upper_bound_offset: int
) -> list[AbortedTxn]:
    """The aborted transactions with records in [fetch_offset, upper_bound_offset): those that
    end at or after the fetch offset and start before the bound (Kafka's collectAbortedTxns)."""
    return [
        e for e in entries if e.last_offset >= fetch_offset and e.first_offset < upper_bound_offset
    ]


def collect_aborted(
    indexes: Iterable[Sequence[AbortedTxn]], fetch_offset: int, upper_bound_offset: int
) -> list[AbortedTxn]:
    """Search the indexes of consecutive segments, from the one holding `fetch_offset`, for
    the aborts overlapping [fetch_offset, upper_bound_offset). A transaction's marker may lie
    segments after its records, so the search goes on until an entry shows that, when it was
    written, the stable offset had passed the bound: every transaction with records below the
    bound had ended by then, so its marker was met already (Kafka's TxnIndexSearchResult)."""
    found: list[AbortedTxn] = []
    for entries in indexes:
        found.extend(overlapping(entries, fetch_offset, upper_bound_offset))
        if any(e.last_stable_offset >= upper_bound_offset for e in entries):
            break
    return found


class TransactionIndex:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] = []
        self._dirty = False
        if path.exists():
            data = path.read_bytes()
            self._entries, valid = decode_entries(data)
            if valid != len(data):
                logger.warning("%s: dropping %d bytes of torn or unknown entries",
                               path, len(data) - valid)
                self._rewrite()

    @property
    def entries(self) -> tuple[AbortedTxn, ...]:
        return tuple(self._entries)

    def append(self, entry: AbortedTxn) -> None:
        """Add an abort; entries stay in the order of their markers' offsets."""
        if self._entries and entry.last_offset <= self._entries[-1].last_offset:
            raise ValueError(
                f"{self.path}: entry ending at {entry.last_offset} is not after the last one, "
                f"ending at {self._entries[-1].last_offset}"
            )
        self._entries.append(entry)
        with open(self.path, "ab") as out:
            out.write(encode_entries([entry]))
        self._dirty = True

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        return overlapping(self._entries, fetch_offset, upper_bound_offset)

    def truncate_to(self, offset: int) -> None:
        """Forget the aborts whose marker lies at or after `offset` (the log is cut there)."""
        keep = [e for e in self._entries if e.last_offset < offset]
        if len(keep) != len(self._entries):
            self._entries = keep
            self._rewrite()

    def _rewrite(self) -> None:
        if not self._entries:
            self.path.unlink(missing_ok=True)
            self._dirty = False
            return
        with open(self.path, "r+b") as out:
            out.truncate(len(self._entries) * ENTRY_SIZE)
        self._dirty = True

    def flush(self) -> None:
        if self._dirty:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self._dirty = False

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        self._entries = []
        self._dirty = False
