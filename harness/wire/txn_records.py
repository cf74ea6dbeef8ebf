"""`__transaction_state` record layouts: Kafka's TransactionLogKey and TransactionLogValue.

Written in Kafka's own byte layout so that Kafka's tools (kafka-dump-log's transaction-log
decoder, a Kafka broker taking over the log) read what the reference broker wrote. The key is
version 0 with the transactional id; the value is version 0, the non-flexible layout Kafka 3.9
writes (and Kafka 4 still writes unless transaction version 2 is finalized): producer id,
epoch, timeout, the state byte, the partitions grouped by topic (null for an Empty
transaction), the last update and the start timestamps. Version 1 (flexible, KIP-915, with
KIP-890's tagged fields) is refused on read: no ZooKeeper-mode broker writes it.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from .group_records import RecordFormatError, RecordReader, write_string

TXN_KEY_VERSION = TXN_VALUE_VERSION = 0
# A value is its head (version, producer id, epoch, timeout, state), the partitions (a count,
# -1 for null, then per topic its name and ids), and its tail (last update, start).
_VALUE_HEAD, _VALUE_TAIL, _COUNT = struct.Struct(">hqhib"), struct.Struct(">qq"), \
    struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int  # the state byte (TransactionState's id)
    partitions: tuple[tuple[str, tuple[int, ...]], ...] | None  # None: Empty writes null
    last_update_ms: int
    start_ms: int


def group_partitions(partitions: Iterable[tuple[str, int]]) -> tuple[tuple[str, tuple[int, ...]],
                                                                      ...]:
    """(topic, partition) pairs as the value's per-topic list, in a stable order."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return tuple((topic, tuple(ids)) for topic, ids in by_topic.items())


def encode_txn_key(transactional_id: str) -> bytes:
    out = io.BytesIO()
    out.write(struct.pack(">h", TXN_KEY_VERSION))
    write_string(out, transactional_id)
    return out.getvalue()


def _reader(data: bytes, version: int, what: str) -> RecordReader:
    reader = RecordReader(data)
    found = reader.i16()
    if found != version:
        raise RecordFormatError(f"unsupported __transaction_state {what} version {found}")
    return reader


def decode_txn_key(data: bytes) -> str:
    return _reader(data, TXN_KEY_VERSION, "key").string()


def encode_txn_value(value: TxnLogValue) -> bytes:
    out = io.BytesIO()
    out.write(_VALUE_HEAD.pack(TXN_VALUE_VERSION, value.producer_id, value.producer_epoch,
                               value.timeout_ms, value.state))
    if value.partitions is None:
        out.write(_COUNT.pack(-1))
    else:
        out.write(_COUNT.pack(len(value.partitions)))
        for topic, ids in value.partitions:
            write_string(out, topic)
            out.write(struct.pack(f">i{len(ids)}i", len(ids), *ids))
    out.write(_VALUE_TAIL.pack(value.last_update_ms, value.start_ms))
    return out.getvalue()


def decode_txn_value(data: bytes) -> TxnLogValue:
    reader = _reader(data, TXN_VALUE_VERSION, "value")
    producer_id, epoch, timeout, state = reader.i64(), reader.i16(), reader.i32(), reader.i8()
    count = reader.i32()
    partitions: tuple[tuple[str, tuple[int, ...]], ...] | None = None
    if count >= 0:
        topics = []
        for _ in range(count):
            topic = reader.string()
            topics.append((topic, tuple(reader.i32() for _ in range(reader.i32()))))
        partitions = tuple(topics)
    return TxnLogValue(producer_id, epoch, timeout, state, partitions, reader.i64(),
                       reader.i64())
