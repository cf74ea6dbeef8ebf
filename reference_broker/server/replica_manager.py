"""The partitions this broker hosts: appends, reads, offsets lookups, and waking delayed fetches.

Kafka's ReplicaManager parks delayed operations in a purgatory; here a delayed fetch awaits a
future that the partition resolves when its high watermark moves, which is the same contract
(answer as soon as min_bytes are readable or max_wait passes) with far less machinery.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

from harness.wire.records import InvalidBatch, validate_batches
from reference_broker.cluster.partition import Partition, PartitionError
from reference_broker.log.log_manager import LogManager
from reference_broker.log.unified_log import OffsetOutOfRange
from reference_broker.server.metadata_cache import TopicInfo

log = logging.getLogger("reference_broker.server.replica_manager")

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class ProduceResult:
    error: str = "NONE"
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self._partitions: dict[TopicPartition, Partition] = {}
        self._waiters: dict[TopicPartition, set[asyncio.Future]] = {}

    # --- partition lifecycle -----------------------------------------------------------------

    def become_leader(self, topic: TopicInfo, log_config: object) -> None:
        for info in topic.partitions.values():
            if info.leader != self.broker_id:
                continue
            key = (topic.name, info.partition)
            partition = self._partitions.get(key)
            if partition is None:
                log_ = self.log_manager.get_or_create_log(topic.name, info.partition, log_config)
                partition = Partition(topic.name, info.partition, log_, self.broker_id,
                                      self._high_watermark_moved)
                self._partitions[key] = partition
            partition.make_leader(info.leader_epoch, info.replicas, info.isr)

    def update_log_config(self, topic: str, log_config: object) -> None:
        self.log_manager.update_config(topic, log_config)

    def delete_topic(self, topic: str) -> None:
        for key in [k for k in self._partitions if k[0] == topic]:
            del self._partitions[key]
            self.log_manager.delete_log(*key)
            self._wake(key)

    def partition(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get((topic, partition))

    def partitions(self) -> Iterable[Partition]:
        return self._partitions.values()

    # --- produce -------------------------------------------------------------------------------

    def append_records(self, topic: str, partition: int, records: bytes | None,
                       now_ms: int | None = None) -> ProduceResult:
        part = self._partitions.get((topic, partition))
        if part is None:
            return ProduceResult("UNKNOWN_TOPIC_OR_PARTITION")
        if not part.is_leader:
            return ProduceResult("NOT_LEADER_OR_FOLLOWER")
        if records is None:
            return ProduceResult("INVALID_RECORD", message="null record set")
        try:
            (header,) = validate_batches(records, part.log.config.max_message_bytes)
        except InvalidBatch as exc:
            log.info("Rejected batch for %s-%d: %s", topic, partition, exc.reason)
            return ProduceResult(exc.error, log_start_offset=part.log.log_start_offset,
                                 message=exc.reason)
        try:
            result = part.append_records_to_leader(bytearray(records), header, now_ms)
        except PartitionError as exc:
            return ProduceResult(exc.error, message=str(exc))
        if result.error is not None:
            return ProduceResult(result.error, log_start_offset=result.log_start_offset)
        return ProduceResult("NONE", result.first_offset, result.log_append_time_ms,
                             result.log_start_offset)

    # --- fetch ---------------------------------------------------------------------------------

    def _high_watermark_moved(self, partition: Partition) -> None:
        self._wake((partition.topic, partition.partition))

    def _wake(self, key: TopicPartition) -> None:
        for future in self._waiters.pop(key, ()):
            if not future.done():
                future.set_result(None)

    async def wait_for_data(self, keys: Iterable[TopicPartition], timeout_s: float) -> None:
        """Return when any of `keys` gets new readable data, or after `timeout_s`."""
        future = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for key in keys:
            self._waiters.setdefault(key, set()).add(future)
        try:
            await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            pass
        finally:
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(future)
                    if not waiters:
                        del self._waiters[key]

    def read(self, topic: str, partition: int, fetch_offset: int, max_bytes: int,
             min_one_batch: bool) -> tuple[str, object]:
        """(error name, ReadResult or None) for one partition of a fetch."""
        part = self._partitions.get((topic, partition))
        if part is None:
            return "UNKNOWN_TOPIC_OR_PARTITION", None
        try:
            return "NONE", part.read_records(fetch_offset, max_bytes, min_one_batch)
        except PartitionError as exc:
            return exc.error, None
        except OffsetOutOfRange:
            return "OFFSET_OUT_OF_RANGE", part

    # --- list offsets --------------------------------------------------------------------------

    def offset_for_timestamp(self, topic: str, partition: int,
                             timestamp: int) -> tuple[str, int, int, int]:
        """(error, timestamp, offset, leader_epoch) as ListOffsets answers it."""
        part = self._partitions.get((topic, partition))
        if part is None:
            return "UNKNOWN_TOPIC_OR_PARTITION", -1, -1, -1
        if not part.is_leader:
            return "NOT_LEADER_OR_FOLLOWER", -1, -1, -1
        log_ = part.log
        epoch = part.leader_epoch
        if timestamp == -2:  # EARLIEST
            return "NONE", -1, log_.log_start_offset, epoch
        if timestamp == -1:  # LATEST: consumers see up to the high watermark
            return "NONE", -1, part.high_watermark, epoch
        if timestamp == -4:  # EARLIEST_LOCAL (KIP-405): no tiered storage, same as earliest
            return "NONE", -1, log_.log_start_offset, epoch
        if timestamp == -5:  # LATEST_TIERED (KIP-1005): nothing is tiered
            return "NONE", -1, -1, epoch
        if timestamp == -3:  # MAX_TIMESTAMP (KIP-734)
            found = log_.max_timestamp_offset()
        else:
            found = log_.fetch_offset_by_timestamp(timestamp)
        if found is None or found[0] >= part.high_watermark:
            return "NONE", -1, -1, epoch
        offset, ts = found
        return "NONE", ts, offset, epoch


def now_ms() -> int:
    return int(time.time() * 1000)
