"""Sparse offset and time indexes for one segment, in Kafka's on-disk layouts.

Entries live in memory (compact arrays, binary-searched) and are appended to the file lazily:
new entries are buffered and written on flush or close. That is safe because an index is only
trusted after a restart when its segment was flushed (below the recovery point) or the broker
shut down cleanly; every other segment is recovered, which rebuilds its indexes. Buffering
keeps index maintenance off the per-append syscall path.

OffsetIndex: big-endian (relative offset i32, file position i32), 8 bytes, `<base>.index`.
TimeIndex: big-endian (timestamp i64, relative offset i32), 12 bytes, `<base>.timeindex`.
"""

from __future__ import annotations

import bisect
import os
import struct
import sys
from array import array
from itertools import pairwise
from pathlib import Path

from reference_broker.log.errors import CorruptIndex

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class _IndexFile:
    """The file behind an index: load, buffered appends, truncation, fsync."""

    def __init__(self, path: Path, entry_size: int, *, create: bool) -> None:
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | (os.O_TRUNC if create else 0)
        self.path = path
        self.entry_size = entry_size
        self._fd: int | None = os.open(path, flags, 0o644)
        self._written = 0  # entries on disk
        self._pending = bytearray()  # entries not yet written
        self._needs_fsync = False

    def load(self) -> bytes:
        """The file's bytes; raises CorruptIndex (and closes) when they cannot be whole entries."""
        fd = self._require_open()
        size = os.fstat(fd).st_size
        if size % self.entry_size:
            self.close()
            raise CorruptIndex(
                f"index {self.path} has {size} bytes, not a multiple of {self.entry_size}"
            )
        data = os.pread(fd, size, 0)
        self._written = size // self.entry_size
        return data

    def add(self, packed: bytes) -> None:
        self._pending += packed

    def keep(self, entries: int) -> None:
        """Drop every entry after the first `entries`."""
        if entries >= self._written:
            del self._pending[(entries - self._written) * self.entry_size :]
            return
        self._pending.clear()
        os.ftruncate(self._require_open(), entries * self.entry_size)
        self._written = entries
        self._needs_fsync = True

    def write_pending(self) -> None:
        if self._pending:
            fd = self._require_open()
            view = memoryview(self._pending)
            while view:
                view = view[os.write(fd, view) :]
            self._written += len(self._pending) // self.entry_size
            self._pending = bytearray()
            self._needs_fsync = True

    def flush(self) -> None:
        self.write_pending()
        if self._needs_fsync:
            os.fsync(self._require_open())
            self._needs_fsync = False

    def close(self) -> None:
        if self._fd is not None:
            self.write_pending()
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.path.unlink(missing_ok=True)

    def _require_open(self) -> int:
        if self._fd is None:
            raise ValueError(f"index {self.path} is closed")
        return self._fd


def _big_endian_int32s(data: bytes) -> array:
    values = array("i")
    values.frombytes(data)
    if sys.byteorder == "little":
        values.byteswap()
    return values


class _Index:
    """What both indexes share: the backing file, capacity, and two in-memory entry columns."""

    ENTRY_SIZE: int

    def __init__(self, path: Path, base_offset: int, max_index_size: int, *, create: bool) -> None:
        self.base_offset = base_offset
        self.max_entries = max_index_size // self.ENTRY_SIZE
        self._file = _IndexFile(path, self.ENTRY_SIZE, create=create)

    def _columns(self) -> tuple[array, array]:
        raise NotImplementedError

    @property
    def path(self) -> Path:
        return self._file.path

    @property
    def entries(self) -> int:
        return len(self._columns()[0])

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def clear(self) -> None:
        """Drop every entry, in memory and on disk, before a rebuild."""
        for column in self._columns():
            del column[:]
        self._file.keep(0)

    def write_pending(self) -> None:
        """Put buffered entries in the file (no fsync): a rebuilt index should not be lost."""
        self._file.write_pending()

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def delete(self) -> None:
        self._file.delete()


class OffsetIndex(_Index):
    """Maps offsets to file positions; entries are batch base offsets, strictly increasing."""

    ENTRY_SIZE = _OFFSET_ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_index_size: int, *, create: bool) -> None:
        super().__init__(path, base_offset, max_index_size, create=create)
        self._offsets = array("i")  # relative to base_offset
        self._positions = array("i")
        if not create:
            pairs = _big_endian_int32s(self._file.load())
            self._offsets = pairs[0::2]
            self._positions = pairs[1::2]

    def _columns(self) -> tuple[array, array]:
        return self._offsets, self._positions

    def entry(self, n: int) -> tuple[int, int]:
        return self.base_offset + self._offsets[n], self._positions[n]

    def last_entry(self) -> tuple[int, int]:
        """The last (offset, position), or (base offset, 0) when empty: the segment start."""
        if not self._offsets:
            return self.base_offset, 0
        return self.entry(len(self._offsets) - 1)

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        self._offsets.append(relative)
        self._positions.append(position)
        self._file.add(_OFFSET_ENTRY.pack(relative, position))

    def lookup(self, offset: int) -> tuple[int, int]:
        """The entry with the largest offset <= `offset` (the segment start if none)."""
        n = bisect.bisect_right(self._offsets, offset - self.base_offset) - 1
        return (self.base_offset, 0) if n < 0 else self.entry(n)

    def lookup_by_position(self, position: int) -> tuple[int, int]:
        """The entry with the largest position <= `position` (the segment start if none)."""
        n = bisect.bisect_right(self._positions, position) - 1
        return (self.base_offset, 0) if n < 0 else self.entry(n)

    def truncate_to_position(self, position: int) -> None:
        """Forget entries for batches at or after `position` (they are being cut off)."""
        keep = bisect.bisect_left(self._positions, position)
        del self._offsets[keep:]
        del self._positions[keep:]
        self._file.keep(keep)

    def sanity_check(self, log_size: int) -> None:
        """Raise CorruptIndex unless entries increase strictly and point inside the log."""
        offsets, positions = self._offsets, self._positions
        if not offsets:
            return
        if offsets[0] < 0 or positions[0] < 0 or positions[-1] >= log_size:
            raise CorruptIndex(f"{self.path}: entry outside the segment ({log_size} bytes)")
        if any(a >= b for a, b in pairwise(offsets)) or any(a >= b for a, b in pairwise(positions)):
            raise CorruptIndex(f"{self.path}: entries are not strictly increasing")



class TimeIndex(_Index):
    """Maps timestamps to offsets: each entry is the segment's max timestamp so far and the base
    offset of the batch that first reached it, so timestamps increase strictly."""

    ENTRY_SIZE = _TIME_ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_index_size: int, *, create: bool) -> None:
        super().__init__(path, base_offset, max_index_size, create=create)
        self._timestamps = array("q")
        self._offsets = array("i")
        if not create:
            for timestamp, relative in _TIME_ENTRY.iter_unpack(self._file.load()):
                self._timestamps.append(timestamp)
                self._offsets.append(relative)

    def _columns(self) -> tuple[array, array]:
        return self._timestamps, self._offsets

    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the last entry, None when empty."""
        if not self._timestamps:
            return None
        return self._timestamps[-1], self.base_offset + self._offsets[-1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add an entry only when the max timestamp grew: equal timestamps add nothing."""
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return
        relative = offset - self.base_offset
        self._timestamps.append(timestamp)
        self._offsets.append(relative)
        self._file.add(_TIME_ENTRY.pack(timestamp, relative))

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the entry with the largest timestamp <= `timestamp`, or
        (-1, base offset) when none: scanning from that offset finds the first batch whose
        max timestamp reaches `timestamp`, because every earlier batch stays below it."""
        n = bisect.bisect_right(self._timestamps, timestamp) - 1
        if n < 0:
            return -1, self.base_offset
        return self._timestamps[n], self.base_offset + self._offsets[n]

    def truncate_to_offset(self, offset: int) -> None:
        """Forget entries that name batches at or after `offset` (they are being cut off)."""
        keep = bisect.bisect_left(self._offsets, offset - self.base_offset)
        del self._timestamps[keep:]
        del self._offsets[keep:]
        self._file.keep(keep)

    def sanity_check(self, next_offset: int) -> None:
        """Raise CorruptIndex unless timestamps increase strictly and offsets are in the segment."""
        if not self._timestamps:
            return
        if self._offsets[0] < 0 or self.base_offset + self._offsets[-1] >= next_offset:
            raise CorruptIndex(f"{self.path}: entry outside the segment's offsets")
        if any(a >= b for a, b in pairwise(self._timestamps)) or any(
            a > b for a, b in pairwise(self._offsets)
        ):
            raise CorruptIndex(f"{self.path}: entries are not increasing")

