"""Open segment files, the byte ranges a fetch sends from them, and header scans over them.

Named after Kafka's FileRecords: the log hands the server file regions rather than bytes so the
socket layer can `os.sendfile` them without copying through Python.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.wire.records import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, read_header

MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
HEADER_SCAN_CHUNK = 8192  # index entries are ~4 KiB apart, so one read usually covers a lookup
RECOVERY_CHUNK = 1 << 20


class SegmentFile:
    """A descriptor for one segment's .log file that stays usable after the file is unlinked.

    Retention may delete a segment while a fetch response pointing into it still waits for
    sendfile. POSIX keeps an unlinked file's bytes while a descriptor is open, so deleting a
    segment only unlinks and drops the segment's reference; the descriptor is closed by a weakref
    finalizer when the last FileRegion lets go (no ResourceWarning, unlike a forgotten file
    object), or explicitly when the log closes.
    """

    __slots__ = ("path", "_fd", "_finalizer", "__weakref__")

    def __init__(self, path: Path, *, create: bool) -> None:
        flags = os.O_RDWR | os.O_APPEND
        if create:
            flags |= os.O_CREAT | os.O_TRUNC
        self.path = path
        self._fd = os.open(path, flags, 0o644)
        self._finalizer = weakref.finalize(self, os.close, self._fd)

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def fileno(self) -> int:
        """The descriptor for os.sendfile; refused once closed so a reused fd is never read."""
        if self.closed:
            raise ValueError(f"segment file {self.path} is closed")
        return self._fd

    def close(self) -> None:
        self._finalizer()

    def pread(self, size: int, position: int) -> bytes:
        """Read up to `size` bytes; short only at end of file."""
        fd = self.fileno()
        data = os.pread(fd, size, position)
        if len(data) == size or not data:
            return data
        parts = [data]
        done = len(data)
        while done < size:
            more = os.pread(fd, size - done, position + done)
            if not more:
                break
            parts.append(more)
            done += len(more)
        return b"".join(parts)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Append all of `data` (the descriptor is O_APPEND)."""
        fd = self.fileno()
        written = os.write(fd, data)
        if written < len(data):
            view = memoryview(data)[written:]
            while view:
                view = view[os.write(fd, view) :]

    def truncate(self, size: int) -> None:
        os.ftruncate(self.fileno(), size)

    def fsync(self) -> None:
        os.fsync(self.fileno())

    def disk_size(self) -> int:
        return os.fstat(self.fileno()).st_size

    def mtime_ms(self) -> int:
        return os.fstat(self.fileno()).st_mtime_ns // 1_000_000


@dataclass(frozen=True, slots=True)
class FileRegion:
    """`size` bytes at `position` of `file`: whole batches, ready for os.sendfile."""

    file: SegmentFile
    position: int
    size: int

    def read_bytes(self) -> bytes:
        data = self.file.pread(self.size, self.position)
        if len(data) != self.size:
            raise OSError(f"{self.file.path} ended {self.size - len(data)} bytes early")
        return data


@dataclass(frozen=True, slots=True)
class FetchSlice:
    """The answer to a log read: regions in offset order, possibly spanning segments."""

    regions: tuple[FileRegion, ...] = ()

    @property
    def total_size(self) -> int:
        return sum(region.size for region in self.regions)

    def read_bytes(self) -> bytes:
        """The bytes themselves, for callers that cannot sendfile (and for tests)."""
        return b"".join(region.read_bytes() for region in self.regions)


def iter_file_headers(
    file: SegmentFile, start: int, end: int, chunk_size: int = HEADER_SCAN_CHUNK
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each batch wholly inside [start, end), reading headers only.

    Stops silently at a tail that cannot be a batch (short, or a length that overruns `end`);
    callers that care compare the last position reached with `end`. The header's own
    `position` field is relative to an internal buffer: use the yielded position.
    """
    for position, header, _ in _scan(file, start, end, chunk_size, with_body=False):
        yield position, header


def iter_file_batches(
    file: SegmentFile, start: int, end: int
) -> Iterator[tuple[int, BatchHeader, memoryview]]:
    """Like iter_file_headers but also yield each batch's bytes, for CRC checks on recovery."""
    for position, header, body in _scan(file, start, end, RECOVERY_CHUNK, with_body=True):
        assert body is not None
        yield position, header, body


def _scan(
    file: SegmentFile, start: int, end: int, chunk_size: int, *, with_body: bool
) -> Iterator[tuple[int, BatchHeader, memoryview | None]]:
    buf = b""
    buf_start = start
    position = start
    while position + HEADER_SIZE <= end:
        off = position - buf_start
        if off + HEADER_SIZE > len(buf):
            buf = file.pread(min(chunk_size, end - position), position)
            buf_start, off = position, 0
            if len(buf) < HEADER_SIZE:
                return
        header = read_header(buf, off)
        size = header.size
        if header.batch_length < MIN_BATCH_LENGTH or position + size > end:
            return
        body = None
        if with_body:
            if off + size > len(buf):
                buf = file.pread(min(max(chunk_size, size), end - position), position)
                buf_start, off = position, 0
                if len(buf) < size:
                    return
            body = memoryview(buf)[off : off + size]
        yield position, header, body
        position += size
