"""Helpers shared by the log tests: batch builders, a fake clock, append shortcuts."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c

from harness.wire.records import MAGIC, BatchHeader, build_batch, iter_headers, read_header
from reference_broker.log.log_config import LogConfig
from reference_broker.log.unified_log import AppendResult, UnifiedLog


class FakeClock:
    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now = now_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def batch(
    count: int = 1,
    *,
    value: bytes = b"value",
    timestamp_ms: int = 1_000,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    compression: int = 0,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    transactional: bool = False,
) -> bytearray:
    return bytearray(
        build_batch(
            [(b"k%d" % i, value) for i in range(count)],
            base_offset=base_offset,
            timestamp_ms=timestamp_ms,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            compression=compression,
            partition_leader_epoch=partition_leader_epoch,
            transactional=transactional,
        )
    )


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = zigzag & 0x7F
        zigzag >>= 7
        if zigzag:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def batch_with_timestamps(timestamps: list[int], *, base_offset: int = 0) -> bytearray:
    """An uncompressed batch whose records carry the given timestamps (build_batch cannot)."""
    base_ts = timestamps[0]
    records = b""
    for delta, ts in enumerate(timestamps):
        body = b"\x00" + _varint(ts - base_ts) + _varint(delta) + _varint(-1) + _varint(1) + b"v"
        body += _varint(0)
        records += _varint(len(body)) + body
    tail = struct.pack(
        ">hiqqqhii", 0, len(timestamps) - 1, base_ts, max(timestamps), -1, -1, -1, len(timestamps)
    )
    tail += records
    head = struct.pack(">qiibI", base_offset, 9 + len(tail), -1, MAGIC, crc32c.crc32c(tail))
    return bytearray(head + tail)


def append(
    log: UnifiedLog, data: bytearray, *, leader_epoch: int = 0, now_ms: int | None = None
) -> AppendResult:
    return log.append_as_leader(data, read_header(data), leader_epoch=leader_epoch, now_ms=now_ms)


def append_many(
    log: UnifiedLog, batches: int, *, records: int = 1, **kw: object
) -> list[AppendResult]:
    return [append(log, batch(records, **kw)) for _ in range(batches)]  # type: ignore[arg-type]


def headers_of(data: bytes) -> list[BatchHeader]:
    return list(iter_headers(data))


def open_log(directory: Path, config: LogConfig | None = None, **kw: object) -> UnifiedLog:
    return UnifiedLog.open(directory, config or LogConfig(), **kw)  # type: ignore[arg-type]


def log_file(directory: Path, base_offset: int = 0) -> Path:
    return directory / f"{base_offset:020d}.log"
