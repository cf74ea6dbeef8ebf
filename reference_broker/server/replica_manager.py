"""The partitions this broker hosts: appends, reads, leadership changes, ISR upkeep, waiting.

Kafka's ReplicaManager parks delayed operations in purgatories; here a delayed fetch or an
acks=all produce awaits a future that the partition resolves when its high watermark (or, for
followers' fetches, its log end) moves, which is the same contract with far less machinery.

Two modes share this class. Standalone, the admin manager makes every partition a local leader.
In ZooKeeper mode the controller's LeaderAndIsr requests decide who leads
(:meth:`ReplicaManager.become_leader_or_follower`), followers copy from leaders through the
fetcher manager, and ISR changes are written to ZooKeeper through ``isr_writer`` before they
take effect.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any

from harness.wire.control_records import EndTxnMarker
from harness.wire.errors import ErrorCode
from harness.wire.records import InvalidBatch, validate_batches
from reference_broker.cluster.partition import (
    IsolationLevel,
    Partition,
    PartitionError,
    ReadResult,
)
from reference_broker.log.log_config import LogConfig
from reference_broker.log.log_manager import LogManager
from reference_broker.log.producer_state import AppendOrigin
from reference_broker.log.unified_log import OffsetOutOfRange
from reference_broker.network.tasks import cancel_and_wait
from reference_broker.server.fetcher import ReplicaFetcherManager
from reference_broker.server.metadata_cache import TopicInfo

log = logging.getLogger("reference_broker.server.replica_manager")

TopicPartition = tuple[str, int]
# (partition, new isr) → the new znode version, or None when the write lost to a newer state
IsrWriter = Callable[[Partition, tuple[int, ...]], Awaitable[int | None]]


@dataclass(frozen=True)
class ProduceResult:
    error: ErrorCode = ErrorCode.none
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    required_offset: int = -1  # the high watermark an acks=all produce waits for


@dataclass(frozen=True)
class PartitionState:
    """One partition of a LeaderAndIsr request."""

    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    is_new: bool = False


@dataclass
class LeadershipChange:
    errors: dict[TopicPartition, ErrorCode]
    new_leaders: list[Partition]
    new_followers: list[Partition]


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.controller_epoch = -1
        self.isr_writer: IsrWriter | None = None
        self.fetchers: ReplicaFetcherManager | None = None  # set in ZooKeeper mode
        self._partitions: dict[TopicPartition, Partition] = {}
        self._waiters: dict[TopicPartition, set[asyncio.Future]] = {}
        self._follower_waiters: dict[TopicPartition, set[asyncio.Future]] = {}
        self._isr_writes: set[TopicPartition] = set()
        self._tasks: set[asyncio.Task] = set()
        self._checkpointed_hws = log_manager.high_watermarks()

    # --- partition lifecycle (standalone) ------------------------------------------------------

    def become_leader(self, topic: TopicInfo, log_config: LogConfig) -> None:
        for info in topic.partitions.values():
            if info.leader != self.broker_id:
                continue
            partition = self._get_or_create(topic.name, info.partition, log_config)
            partition.make_leader(info.leader_epoch, info.replicas, info.isr)

    def _get_or_create(self, topic: str, index: int, log_config: LogConfig) -> Partition:
        key = (topic, index)
        partition = self._partitions.get(key)
        if partition is None:
            log_ = self.log_manager.get_or_create_log(topic, index, log_config)
            partition = Partition(topic, index, log_, self.broker_id, self._high_watermark_moved)
            hw = self._checkpointed_hws.get(key)
            if hw is not None:
                partition.restore_high_watermark(hw)
            self._partitions[key] = partition
        return partition

    def update_log_config(self, topic: str, log_config: LogConfig) -> None:
        self.log_manager.update_config(topic, log_config)

    def delete_topic(self, topic: str) -> None:
        for key in [k for k in self._partitions if k[0] == topic]:
            self._remove(key, delete=True)

    def _remove(self, key: TopicPartition, delete: bool) -> None:
        self._partitions.pop(key, None)
        if self.fetchers is not None:
            self.fetchers.remove_partitions([key])
        if delete:
            self.log_manager.delete_log(*key)
        self._wake(key)
        self._wake_followers(key)

    def partition(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get((topic, partition))

    def partitions(self) -> Iterable[Partition]:
        return self._partitions.values()

    # --- partition lifecycle (ZooKeeper mode) --------------------------------------------------

    def check_controller_epoch(self, controller_epoch: int) -> bool:
        """False for a request from a deposed controller (STALE_CONTROLLER_EPOCH)."""
        if controller_epoch < self.controller_epoch:
            return False
        self.controller_epoch = controller_epoch
        return True

    def become_leader_or_follower(
        self, states: list[PartitionState], log_config_of: Callable[[str], LogConfig],
        now_ms: int,
    ) -> LeadershipChange:
        """Apply a LeaderAndIsr request whose controller epoch has been checked."""
        change = LeadershipChange({}, [], [])
        for state in states:
            key = (state.topic, state.partition)
            if self.broker_id not in state.replicas:
                change.errors[key] = ErrorCode.unknown_topic_or_partition
                continue
            current = self._partitions.get(key)
            if current is not None and state.leader_epoch < current.leader_epoch:
                log.info("Ignoring LeaderAndIsr for %s: leader epoch %d is older than %d",
                         current, state.leader_epoch, current.leader_epoch)
                change.errors[key] = ErrorCode.stale_controller_epoch
                continue
            if current is not None and state.zk_version < current.zk_version:
                # Kafka's partition epoch: a state older than the one this replica holds, as
                # when the controller retries a LeaderAndIsr cut off by a fault after the leader
                # has written a new ISR. Applied, it would put back the old ISR and version; the
                # leader's next ISR write would then lose to its own and never be made.
                log.info("Ignoring LeaderAndIsr for %s: partition state version %d is older "
                         "than %d", current, state.zk_version, current.zk_version)
                change.errors[key] = ErrorCode.none
                continue
            partition = self._get_or_create(state.topic, state.partition,
                                            log_config_of(state.topic))
            change.errors[key] = ErrorCode.none
            if state.leader == self.broker_id:
                if partition.make_leader(state.leader_epoch, state.replicas, state.isr,
                                         controller_epoch=state.controller_epoch,
                                         zk_version=state.zk_version, now_ms=now_ms,
                                         standalone=False):
                    log.info("Leading %s at epoch %d, ISR %s, log end %d, high watermark %d",
                             partition, state.leader_epoch, list(state.isr),
                             partition.log.log_end_offset, partition.high_watermark)
                    change.new_leaders.append(partition)
                if self.fetchers is not None:
                    self.fetchers.remove_partitions([key])
                self._wake_followers(key)
            else:
                if partition.make_follower(state.leader, state.leader_epoch, state.replicas,
                                           state.isr, controller_epoch=state.controller_epoch,
                                           zk_version=state.zk_version):
                    log.info("Following broker %d for %s at epoch %d", state.leader, partition,
                             state.leader_epoch)
                    change.new_followers.append(partition)
                    if self.fetchers is not None:
                        self.fetchers.remove_partitions([key])
                        if state.leader >= 0:
                            self.fetchers.add_partition(partition)
                self._wake(key)
                self._wake_followers(key)
        return change

    def stop_replica(self, topic: str, partition: int, delete: bool) -> ErrorCode:
        key = (topic, partition)
        if key not in self._partitions:
            if delete:
                self.log_manager.delete_log(topic, partition)
            return ErrorCode.none
        # Without delete the log stays on disk, as in Kafka, and is reopened if the replica
        # is assigned here again.
        self._remove(key, delete)
        log.info("Stopped replica %s-%d%s", topic, partition, " and deleted it" if delete else "")
        return ErrorCode.none

    # --- ISR upkeep (leaders, ZooKeeper mode) --------------------------------------------------

    def maybe_shrink_isr(self, max_lag_ms: int, now_ms: int | None = None) -> None:
        now = now_ms if now_ms is not None else current_ms()
        for partition in list(self._partitions.values()):
            new_isr = partition.shrunk_isr(now, max_lag_ms)
            if new_isr is not None:
                log.info("Shrinking ISR of %s from %s to %s", partition, list(partition.isr),
                         list(new_isr))
                self._write_isr(partition, new_isr)

    def _write_isr(self, partition: Partition, new_isr: tuple[int, ...]) -> None:
        key = (partition.topic, partition.partition)
        if self.isr_writer is None or key in self._isr_writes:
            return
        self._isr_writes.add(key)
        epoch = partition.leader_epoch
        writer = self.isr_writer

        async def write() -> None:
            try:
                version = await writer(partition, new_isr)
            except Exception:
                log.exception("Writing the ISR of %s failed", partition)
                return
            finally:
                self._isr_writes.discard(key)
            if version is None or partition.leader_epoch != epoch or not partition.is_leader:
                return
            partition.apply_isr(new_isr, version)
            self._wake(key)

        self._spawn(write())

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def shutdown(self) -> None:
        for task in list(self._tasks):
            await cancel_and_wait(task)

    def high_watermarks(self) -> dict[TopicPartition, int]:
        return {key: p.high_watermark for key, p in self._partitions.items()}

    # --- produce -------------------------------------------------------------------------------

    def append_records(self, topic: str, partition: int, records: bytes | None,
                       now_ms: int | None = None, required_acks: int = 1,
                       min_insync_replicas: int = 1,
                       origin: AppendOrigin = AppendOrigin.CLIENT) -> ProduceResult:
        part = self._partitions.get((topic, partition))
        if part is None:
            return ProduceResult(ErrorCode.unknown_topic_or_partition)
        if not part.is_leader:
            return ProduceResult(ErrorCode.not_leader_or_follower)
        if records is None:
            return ProduceResult(ErrorCode.invalid_record, message="null record set")
        try:
            (header,) = validate_batches(records, part.log.config.max_message_bytes)
        except InvalidBatch as exc:
            log.info("Rejected batch for %s-%d: %s", topic, partition, exc.reason)
            return ProduceResult(exc.error, log_start_offset=part.log.log_start_offset,
                                 message=exc.reason)
        if header.base_offset != 0:
            # As Kafka's LogValidator: offsets are the leader's to assign, so a producer's batch
            # carries base offset 0 and one that does not comes from a broken client.
            reason = f"the batch's base offset is {header.base_offset}, not 0"
            log.info("Rejected batch for %s-%d: %s", topic, partition, reason)
            return ProduceResult(ErrorCode.invalid_record,
                                 log_start_offset=part.log.log_start_offset, message=reason)
        try:
            result = part.append_records_to_leader(bytearray(records), header, now_ms,
                                                   required_acks, min_insync_replicas, origin)
        except PartitionError as exc:
            return ProduceResult(exc.error, message=str(exc))
        if result.error is not None:
            return ProduceResult(result.error, log_start_offset=result.log_start_offset)
        self._wake_followers((topic, partition))
        return ProduceResult(ErrorCode.none, result.first_offset, result.log_append_time_ms,
                             result.log_start_offset,
                             required_offset=result.last_offset + 1)

    def append_txn_marker(self, topic: str, partition: int, marker: EndTxnMarker,
                          producer_id: int, producer_epoch: int,
                          min_insync_replicas: int = 1) -> ProduceResult:
        """Append one transaction marker as leader (WriteTxnMarkers); the caller then waits on
        `wait_for_acks` as for acks=all, as Kafka's coordinator-origin appends do."""
        part = self._partitions.get((topic, partition))
        if part is None:
            return ProduceResult(ErrorCode.unknown_topic_or_partition)
        try:
            result = part.append_marker_to_leader(marker, producer_id, producer_epoch,
                                                  min_insync_replicas)
        except PartitionError as exc:
            return ProduceResult(exc.error, message=str(exc))
        if result.error is not None:
            return ProduceResult(result.error, log_start_offset=result.log_start_offset)
        self._wake_followers((topic, partition))
        return ProduceResult(ErrorCode.none, result.first_offset, -1, result.log_start_offset,
                             required_offset=result.last_offset + 1)

    async def wait_for_acks(self, topic: str, partition: int, required_offset: int,
                            timeout_s: float, min_insync_replicas: int) -> ErrorCode:
        """acks=all: wait until the ISR holds everything below `required_offset`."""
        key = (topic, partition)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            part = self._partitions.get(key)
            if part is None:
                return ErrorCode.not_leader_or_follower
            outcome = part.acks_all_outcome(required_offset, min_insync_replicas)
            if outcome is not None:
                return outcome
            remaining = deadline - loop.time()
            if remaining <= 0:
                return ErrorCode.request_timed_out
            await self.wait_for_data([key], remaining)

    # --- fetch ---------------------------------------------------------------------------------

    def _high_watermark_moved(self, partition: Partition) -> None:
        self._wake((partition.topic, partition.partition))

    def _wake(self, key: TopicPartition) -> None:
        for future in self._waiters.pop(key, ()):
            _settle(future)

    def _wake_followers(self, key: TopicPartition) -> None:
        for future in self._follower_waiters.pop(key, ()):
            _settle(future)

    def watch_data(self, keys: Iterable[TopicPartition], timeout_s: float,
                   from_follower: bool = False) -> asyncio.Future[None]:
        """A future done when any of `keys` gets new readable data, or after `timeout_s`.

        Consumers wait for the high watermark to move; followers for the log end. The watch is
        registered by this call, not when the future is first awaited: a caller that read too
        little and will await from a task (which runs a loop turn later) must not miss an
        append handled in between, as Kafka's tryCompleteElseWatch checks again once watching.
        The future ends itself at `timeout_s`, so one nobody awaits leaves nothing behind.
        """
        loop = asyncio.get_running_loop()
        table = self._follower_waiters if from_follower else self._waiters
        future: asyncio.Future[None] = loop.create_future()
        keys = list(keys)
        for key in keys:
            table.setdefault(key, set()).add(future)
        timer = loop.call_later(timeout_s, _settle, future)

        def forget(_: asyncio.Future[None]) -> None:
            timer.cancel()
            for key in keys:
                waiters = table.get(key)
                if waiters is not None:
                    waiters.discard(future)
                    if not waiters:
                        del table[key]

        future.add_done_callback(forget)
        return future

    async def wait_for_data(self, keys: Iterable[TopicPartition], timeout_s: float,
                            from_follower: bool = False) -> None:
        """Return when any of `keys` gets new readable data, or after `timeout_s`."""
        await self.watch_data(keys, timeout_s, from_follower)

    def read(self, topic: str, partition: int, fetch_offset: int, max_bytes: int,
             min_one_batch: bool, replica_id: int = -1,
             current_leader_epoch: int = -1,
             follower_may_serve: bool = False,
             isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
             ) -> tuple[ErrorCode, object]:
        """(error, ReadResult or None) for one partition of a fetch.

        A fetch from a follower (`replica_id` >= 0) reads up to the log end and tells the
        leader how far that follower has got, which may move the high watermark or widen the
        ISR. `follower_may_serve`: a consumer's fetch with client metadata, which a follower
        answers too (KIP-392).
        """
        part = self._partitions.get((topic, partition))
        if part is None:
            return ErrorCode.unknown_topic_or_partition, None
        try:
            part.check_leader_epoch(current_leader_epoch)
            if replica_id >= 0 and part.is_leader \
                    and part.log.log_start_offset <= fetch_offset <= part.log.log_end_offset:
                # Only a fetch inside the leader's log says where the follower is: one past the
                # end comes from a diverged follower that must truncate first.
                wider = part.update_follower_fetch_state(replica_id, fetch_offset, current_ms())
                if wider is not None:
                    log.info("Expanding ISR of %s from %s to %s", part, list(part.isr),
                             list(wider))
                    self._write_isr(part, wider)
            return ErrorCode.none, part.read_records(fetch_offset, max_bytes, min_one_batch,
                                                     from_follower=replica_id >= 0,
                                                     follower_may_serve=follower_may_serve,
                                                     isolation=isolation)
        except PartitionError as exc:
            return exc.error, None
        except OffsetOutOfRange:
            return ErrorCode.offset_out_of_range, part

    def end_offset_for_epoch(self, topic: str, partition: int, leader_epoch: int,
                             current_leader_epoch: int, replica_id: int
                             ) -> tuple[ErrorCode, int, int]:
        """OffsetsForLeaderEpoch for one partition: (error, epoch, end offset)."""
        part = self._partitions.get((topic, partition))
        if part is None:
            return ErrorCode.unknown_topic_or_partition, -1, -1
        if not part.is_leader and replica_id != -2:
            return ErrorCode.not_leader_or_follower, -1, -1
        try:
            part.check_leader_epoch(current_leader_epoch)
        except PartitionError as exc:
            return exc.error, -1, -1
        epoch, end = part.log.end_offset_for_epoch(leader_epoch)
        return ErrorCode.none, epoch, end

    # --- list offsets --------------------------------------------------------------------------

    def offset_for_timestamp(self, topic: str, partition: int, timestamp: int,
                             isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
                             ) -> tuple[ErrorCode, int, int, int]:
        """(error, timestamp, offset, leader_epoch) as ListOffsets answers it; what lies at or
        past the readable end (the high watermark, or the last stable offset for
        read_committed) is not answered, as in Kafka."""
        part = self._partitions.get((topic, partition))
        if part is None:
            return ErrorCode.unknown_topic_or_partition, -1, -1, -1
        if not part.is_leader:
            return ErrorCode.not_leader_or_follower, -1, -1, -1
        log_ = part.log
        epoch = part.leader_epoch
        if timestamp == -2:  # EARLIEST
            return ErrorCode.none, -1, log_.log_start_offset, epoch
        readable_end = part.readable_end(isolation)
        if timestamp == -1:  # LATEST: consumers see up to the readable end
            return ErrorCode.none, -1, readable_end, epoch
        if timestamp == -4:  # EARLIEST_LOCAL (KIP-405): no tiered storage, same as earliest
            return ErrorCode.none, -1, log_.log_start_offset, epoch
        if timestamp == -5:  # LATEST_TIERED (KIP-1005): nothing is tiered
            return ErrorCode.none, -1, -1, epoch
        if timestamp == -3:  # MAX_TIMESTAMP (KIP-734)
            found = log_.max_timestamp_offset()
        else:
            found = log_.fetch_offset_by_timestamp(timestamp)
        if found is None or found[0] >= readable_end:
            return ErrorCode.none, -1, -1, epoch
        offset, ts = found
        return ErrorCode.none, ts, offset, epoch


def _settle(future: asyncio.Future[None]) -> None:
    """End a data watch (woken or timed out); one already ended or cancelled is left as is."""
    if not future.done():
        future.set_result(None)


def current_ms() -> int:
    return int(time.time() * 1000)


now_ms = current_ms

__all__ = ["ProduceResult", "PartitionState", "ReplicaManager", "ReadResult", "now_ms"]
