"""What the group and the transaction coordinators share: where a key's state lives, how an
append failure reads to a client, and the replay of an internal topic's partition.

Kafka keeps these in its coordinator-common module for the same reason: both coordinators
place a key on a partition of their internal topic with Java's String.hashCode, both answer a
failed append with a coordinator error, and both rebuild their memory on becoming leader by
reading their partition to its end while still serving other requests.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

from harness.wire.errors import ErrorCode

KeyValue = tuple[bytes, bytes | None]
ProducerIdAndEpoch = tuple[int, int]


class AppendToPartition(Protocol):
    """Append records to an internal topic's partition; a Kafka error code, `none` on success.
    With `producer`, the records are one transactional batch of that producer (TxnOffsetCommit),
    which its transaction's marker later commits or aborts."""

    def __call__(self, partition: int, records: list[KeyValue],
                 producer: ProducerIdAndEpoch | None = None) -> ErrorCode: ...


class ControlType(IntEnum):
    """A transaction marker's control record type (the key's second int16)."""

    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class LoggedRecord:
    """One record of an internal topic as its replay needs it: the key and value, and for a
    transactional batch its producer id; a marker has `control` set and no value."""

    key: bytes | None
    value: bytes | None
    producer_id: int = -1
    transactional: bool = False
    control: ControlType | None = None


ReadPartition = Callable[[int], Iterable[LoggedRecord]]
"""Every record of an internal topic's partition up to its log end, in offset order."""

_INT_MIN = -(2**31)
# Records replayed between two yields to the event loop (other requests are served meanwhile).
_REPLAY_SLICE = 256

# How an append failure reads to a client (Kafka maps produce errors the same way).
APPEND_ERRORS: dict[ErrorCode, ErrorCode] = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
    ErrorCode.invalid_fetch_size: ErrorCode.unknown_server_error,
}


def java_string_hash(value: str) -> int:
    """Java's String.hashCode: 31*h + c over UTF-16 code units, wrapped to a signed int32."""
    h = 0
    encoded = value.encode("utf-16-be")
    for i in range(0, len(encoded), 2):
        h = (31 * h + ((encoded[i] << 8) | encoded[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, num_partitions: int) -> int:
    """Kafka's placement of a group or transactional id: Utils.abs(hashCode) (which maps
    Integer.MIN_VALUE to 0) mod the partition count."""
    h = java_string_hash(key)
    return (0 if h == _INT_MIN else abs(h)) % num_partitions


class CoordinatorPartitions:
    """Which partitions of its internal topic a coordinator serves, and the answer for a key
    of any other: COORDINATOR_LOAD_IN_PROGRESS while its partition is replayed here,
    NOT_COORDINATOR when another broker leads it."""

    def __init__(self, num_partitions: int) -> None:
        self.num_partitions = num_partitions
        self.owned: set[int] = set()
        self.loading: set[int] = set()

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.num_partitions)

    def ownership_error(self, key: str) -> ErrorCode:
        """NONE if this coordinator serves the key now, else the error the client must see."""
        partition = self.partition_for(key)
        if partition in self.loading:
            return ErrorCode.coordinator_load_in_progress
        if partition not in self.owned:
            return ErrorCode.not_coordinator
        return ErrorCode.none


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


async def replay(read: ReadPartition, partition: int,
                 owned: Collection[int]) -> list[LoggedRecord] | None:
    """The keyed records and the markers of `partition` to its log end, yielding to the event
    loop every few hundred so the broker keeps serving; None if `partition` left `owned`
    meanwhile (this broker stopped leading it, and the new leader loads it instead)."""
    records: list[LoggedRecord] = []
    if partition not in owned:
        return None
    for count, record in enumerate(read(partition), 1):
        if count % _REPLAY_SLICE == 0:
            await asyncio.sleep(0)
            if partition not in owned:
                return None
        if record.key is not None or record.control is not None:
            records.append(record)
    return records
