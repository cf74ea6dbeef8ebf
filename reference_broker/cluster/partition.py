"""One partition replica on this broker: leader state, ISR, high watermark, leader epoch.

As in Kafka, the high watermark is the smallest log end offset among the in-sync replicas and
bounds what consumers may read. With only this broker in the ISR it moves with every append;
follower tracking extends `_replica_leos` when replication arrives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harness.wire.records import BatchHeader
from reference_broker.log.unified_log import UnifiedLog


class PartitionError(Exception):
    """A per-partition failure answered with a Kafka error name (e.g. NOT_LEADER_OR_FOLLOWER)."""

    def __init__(self, error: str, message: str = "") -> None:
        super().__init__(message or error)
        self.error = error


@dataclass(frozen=True)
class ReadResult:
    records: object | None  # the log's FetchSlice, or None when nothing is readable
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int


class Partition:
    def __init__(
        self,
        topic: str,
        partition: int,
        log: UnifiedLog,
        local_broker_id: int,
        on_high_watermark: Callable[[Partition], None],
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.log = log
        self.local_broker_id = local_broker_id
        self.leader_id = -1
        self.leader_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self._replica_leos: dict[int, int] = {}
        self._high_watermark = log.log_end_offset
        self._on_high_watermark = on_high_watermark

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    def make_leader(
        self, leader_epoch: int, replicas: tuple[int, ...], isr: tuple[int, ...]
    ) -> None:
        self.leader_id = self.local_broker_id
        self.leader_epoch = leader_epoch
        self.replicas = replicas
        self.isr = isr
        self._replica_leos = {r: -1 for r in replicas if r != self.local_broker_id}
        self._maybe_increment_high_watermark()

    def append_records_to_leader(
        self, records: bytearray, header: BatchHeader, now_ms: int | None = None
    ) -> object:
        if not self.is_leader:
            raise PartitionError(
                "NOT_LEADER_OR_FOLLOWER",
                f"broker {self.local_broker_id} does not lead {self.topic}-{self.partition}",
            )
        result = self.log.append_as_leader(
            records, header, leader_epoch=self.leader_epoch, now_ms=now_ms
        )
        if not result.duplicate and result.error is None:
            self._maybe_increment_high_watermark()
        return result

    def _maybe_increment_high_watermark(self) -> None:
        leos = [self.log.log_end_offset]
        leos += [leo for r, leo in self._replica_leos.items() if r in self.isr]
        new_hw = min(leos)
        if new_hw > self._high_watermark:
            self._high_watermark = new_hw
            self._on_high_watermark(self)
        elif new_hw < self._high_watermark and not self._replica_leos:
            # A standalone leader whose log was cut back (recovery) must not advertise data
            # it no longer has.
            self._high_watermark = new_hw

    def read_records(
        self, fetch_offset: int, max_bytes: int, min_one_batch: bool, from_follower: bool = False
    ) -> ReadResult:
        if not self.is_leader:
            raise PartitionError("NOT_LEADER_OR_FOLLOWER")
        bound = self.log.log_end_offset if from_follower else self._high_watermark
        records = self.log.read(fetch_offset, max_bytes, bound, min_one_batch)
        return ReadResult(
            records,
            self._high_watermark,
            self._high_watermark,
            self.log.log_start_offset,
            self.log.log_end_offset,
        )
