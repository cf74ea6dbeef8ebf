"""An internal topic a coordinator keeps its state on (`__consumer_offsets`,
`__transaction_state`): created on first use, appended to, and replayed through the replica
manager when this broker becomes leader of one of its partitions.

These are the small interfaces DESIGN.md asks for: a coordinator gets "append these records to
partition p" and "read partition p back" as callables and never imports the server. Creation
follows Kafka: the first FindCoordinator creates the topic with the configured partitions and
replicas and cleanup.policy=compact; while too few brokers are alive for that factor the answer
is COORDINATOR_NOT_AVAILABLE. The two topics differ only in which settings apply
(`InternalTopicSpec`): the transaction log also sets its own min.insync.replicas and always
waits for the whole ISR.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any

from harness.wire.errors import ErrorCode
from harness.wire.records import (
    NO_PRODUCER_ID,
    BatchHeader,
    Record,
    build_batch,
    decode_records,
    iter_headers,
)
from reference_broker.config import KafkaConfig
from reference_broker.coordinator.common import ControlType, LoggedRecord
from reference_broker.log.producer_state import AppendOrigin
from reference_broker.server.admin_manager import AdminError, AdminManager, NewTopic
from reference_broker.server.metadata_cache import MetadataCache, PartitionInfo
from reference_broker.server.replica_manager import ReplicaManager, now_ms

log = logging.getLogger("reference_broker.server.internal_topic")

_READ_CHUNK = 1 << 20
_CONTROL_KEY = struct.Struct(">hh")  # a marker's key: version, type

OnElected = Callable[[int], Coroutine[Any, Any, None]]


@dataclass(frozen=True)
class InternalTopicSpec:
    """Which broker settings shape one internal topic (Kafka names them per topic)."""

    name: str
    partitions_key: str
    replication_key: str
    segment_bytes_key: str
    timeout_key: str  # how long an append waits for the ISR
    required_acks_key: str | None = None  # None: always -1 (the transaction log's rule)
    min_isr_key: str | None = None  # the topic's min.insync.replicas, enforced on append


class InternalTopic:
    def __init__(self, config: KafkaConfig, admin: AdminManager, cache: MetadataCache,
                 replicas: ReplicaManager, spec: InternalTopicSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self._config = config
        self._admin = admin
        self._cache = cache
        self._replicas = replicas
        self._broker_id = config.broker_id
        self._on_elected: OnElected | None = None
        self._on_resigned: Callable[[int], None] | None = None
        self._loads: set[asyncio.Task[None]] = set()
        self._appended: dict[int, int] = {}

    def partition_count(self, stored: int | None) -> int:
        """The existing topic's partition count wins over the config, as in Kafka."""
        return stored if stored is not None else self._config[self.spec.partitions_key]

    def start(self, on_elected: OnElected,
              on_resigned: Callable[[int], None] | None = None) -> None:
        """Hand over the coordinator's "you lead / no longer lead this partition" hooks; in
        standalone mode load what exists."""
        self._on_elected = on_elected
        self._on_resigned = on_resigned
        if self._cache.topic(self.name) is not None and not self._config.zookeeper_mode:
            self._elect_local_leaders()

    def ensure_exists(self) -> ErrorCode:
        """Create the topic if missing; `none` or the error FindCoordinator answers."""
        if self._cache.topic(self.name) is not None:
            return ErrorCode.none
        configs = {"cleanup.policy": "compact",
                   "segment.bytes": str(self._config["offsets.topic.segment.bytes"])}
        try:
            self._admin.create_topic(NewTopic(
                self.name, self._config[self.spec.partitions_key],
                self._config["offsets.topic.replication.factor"], configs=configs))
        except AdminError as exc:
            if exc.error is ErrorCode.topic_already_exists:
                return ErrorCode.none
            log.warning("Cannot create %s: %s", self.name, exc.message)
            return ErrorCode.coordinator_not_available
        self._elect_local_leaders()
        return ErrorCode.none

    def leader_of(self, partition: int) -> PartitionInfo | None:
        topic = self._cache.topic(self.name)
        return None if topic is None else topic.partitions.get(partition)

    def _elect_local_leaders(self) -> None:
        topic = self._cache.topic(self.name)
        if topic is None or self._on_elected is None:
            return
        loop = asyncio.get_running_loop()
        for info in topic.partitions.values():
            if info.leader == self._broker_id:
                task = loop.create_task(self._on_elected(info.partition))
                self._loads.add(task)
                task.add_done_callback(self._load_done)

    def on_leadership(self, leaders: list, left: list[tuple[str, int]]) -> None:
        """ZooKeeper mode: coordinate what the partitions this broker now leads hold (loading
        them first) and stop coordinating those it no longer leads."""
        if self._on_elected is None:
            return
        for topic, partition in left:
            if topic == self.name and self._on_resigned is not None:
                self._on_resigned(partition)
        loop = asyncio.get_running_loop()
        for part in leaders:
            if part.topic == self.name:
                task = loop.create_task(self._on_elected(part.partition))
                self._loads.add(task)
                task.add_done_callback(self._load_done)

    def _load_done(self, task: asyncio.Task[None]) -> None:
        self._loads.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("Loading a partition of %s failed", self.name, exc_info=task.exception())

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]],
               producer: tuple[int, int] | None = None) -> ErrorCode:
        """One batch of `records`; with `producer` (id, epoch), a transactional batch of that
        producer, as Kafka writes a TxnOffsetCommit (no sequence: the coordinator writes it)."""
        pid, epoch = producer if producer is not None else (NO_PRODUCER_ID, -1)
        batch = build_batch(records, timestamp_ms=now_ms(), producer_id=pid,
                            producer_epoch=epoch, transactional=producer is not None)
        min_isr = self._min_isr()
        result = self._replicas.append_records(self.name, partition, batch,
                                               required_acks=self._append_acks(),
                                               min_insync_replicas=min_isr,
                                               origin=AppendOrigin.COORDINATOR)
        if result.error is ErrorCode.none:
            self._appended[partition] = result.required_offset
        return result.error

    def _append_acks(self) -> int:
        """The transaction log appends with acks -1 (so a short ISR refuses it at once with
        NOT_ENOUGH_REPLICAS); the offsets topic appends first and waits afterwards."""
        return -1 if self.spec.required_acks_key is None else 1

    def _min_isr(self) -> int:
        return 1 if self.spec.min_isr_key is None else self._config[self.spec.min_isr_key]

    async def wait_replicated(self, partition: int) -> ErrorCode:
        """Seed 000: a write is acknowledged once the partition's ISR has it (required acks
        -1, always for the transaction log), or REQUEST_TIMED_OUT after the topic's timeout."""
        spec = self.spec
        required = self._appended.get(partition, -1)
        acks = -1 if spec.required_acks_key is None else self._config[spec.required_acks_key]
        if acks != -1 or required < 0:
            return ErrorCode.none
        return await self._replicas.wait_for_acks(
            self.name, partition, required, self._config[spec.timeout_key] / 1000,
            min_insync_replicas=self._min_isr())

    async def append_replicated(self, partition: int,
                                records: list[tuple[bytes, bytes | None]]) -> ErrorCode:
        """Append, then wait for the ISR: what a coordinator that answers only after its
        write is durable (the transaction coordinator) awaits."""
        error = self.append(partition, records)
        if error is not ErrorCode.none:
            return error
        return await self.wait_replicated(partition)

    def read(self, partition: int) -> Iterator[LoggedRecord]:
        """Replay to the log end, as Kafka's loader does (FetchLogEnd), not to the high
        watermark: a new leader's high watermark lags what its ISR acknowledged, and stopping
        there would lose the commits acknowledged last before a failover. Markers come as
        records with `control` set, so pending transactional offsets can be settled."""
        part = self._replicas.partition(self.name, partition)
        if part is None:
            return
        offset = part.log.log_start_offset
        end = part.log.log_end_offset
        while offset < end:
            data = part.log.read(offset, _READ_CHUNK, end, min_one_batch=True).read_bytes()
            if not data:
                return
            for header in iter_headers(data):
                batch = data[header.position:header.position + header.size]
                for record in decode_records(batch):
                    if record.offset >= offset:
                        yield _logged(header, record)
                offset = header.next_offset

    async def shutdown(self) -> None:
        for task in list(self._loads):
            task.cancel()


def _logged(header: BatchHeader, record: Record) -> LoggedRecord:
    control = None
    if header.is_control and record.key is not None and len(record.key) >= _CONTROL_KEY.size:
        _version, kind = _CONTROL_KEY.unpack_from(record.key)
        control = ControlType(kind) if kind in (ControlType.ABORT, ControlType.COMMIT) else None
    return LoggedRecord(None if header.is_control else record.key, record.value,
                        header.producer_id, header.is_transactional, control)
