"""`__consumer_offsets` as the group coordinator sees it: created on first use, appended to and
replayed through the replica manager.

These are the small interfaces DESIGN.md asks for: the coordinator gets "append these records to
offsets partition p" and "read offsets partition p back" as callables and never imports the
server. Creation follows Kafka: the first FindCoordinator creates the topic with
offsets.topic.num.partitions partitions, offsets.topic.replication.factor replicas and
cleanup.policy=compact; while too few brokers are alive for that factor the answer is
COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

from harness.wire.errors import ErrorCode
from harness.wire.records import build_batch, decode_records, iter_headers
from reference_broker.config import KafkaConfig
from reference_broker.server.admin_manager import AdminError, AdminManager, NewTopic
from reference_broker.server.metadata_cache import MetadataCache, PartitionInfo
from reference_broker.server.replica_manager import ReplicaManager, now_ms

log = logging.getLogger("reference_broker.server.offsets_topic")

OFFSETS_TOPIC = "__consumer_offsets"
_READ_CHUNK = 1 << 20

OnElected = Callable[[int], Coroutine[Any, Any, None]]


class OffsetsTopic:
    def __init__(self, config: KafkaConfig, admin: AdminManager, cache: MetadataCache,
                 replicas: ReplicaManager) -> None:
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
        return stored if stored is not None else self._config["offsets.topic.num.partitions"]

    def start(self, on_elected: OnElected,
              on_resigned: Callable[[int], None] | None = None) -> None:
        """Hand over the coordinator's "you lead / no longer lead this partition" hooks; in
        standalone mode load what exists."""
        self._on_elected = on_elected
        self._on_resigned = on_resigned
        if self._cache.topic(OFFSETS_TOPIC) is not None and not self._config.zookeeper_mode:
            self._elect_local_leaders()

    def ensure_exists(self) -> ErrorCode:
        """Create the topic if missing; `none` or the error FindCoordinator answers."""
        if self._cache.topic(OFFSETS_TOPIC) is not None:
            return ErrorCode.none
        configs = {"cleanup.policy": "compact",
                   "segment.bytes": str(self._config["offsets.topic.segment.bytes"])}
        try:
            self._admin.create_topic(NewTopic(
                OFFSETS_TOPIC, self._config["offsets.topic.num.partitions"],
                self._config["offsets.topic.replication.factor"], configs=configs))
        except AdminError as exc:
            if exc.error is ErrorCode.topic_already_exists:
                return ErrorCode.none
            log.warning("Cannot create %s: %s", OFFSETS_TOPIC, exc.message)
            return ErrorCode.coordinator_not_available
        self._elect_local_leaders()
        return ErrorCode.none

    def leader_of(self, partition: int) -> PartitionInfo | None:
        topic = self._cache.topic(OFFSETS_TOPIC)
        return None if topic is None else topic.partitions.get(partition)

    def _elect_local_leaders(self) -> None:
        topic = self._cache.topic(OFFSETS_TOPIC)
        if topic is None or self._on_elected is None:
            return
        loop = asyncio.get_running_loop()
        for info in topic.partitions.values():
            if info.leader == self._broker_id:
                task = loop.create_task(self._on_elected(info.partition))
                self._loads.add(task)
                task.add_done_callback(self._load_done)

    def on_leadership(self, leaders: list, left: list[tuple[str, int]]) -> None:
        """ZooKeeper mode: coordinate the groups of the offsets partitions this broker now
        leads (loading them first) and stop coordinating those it no longer leads."""
        if self._on_elected is None:
            return
        for topic, partition in left:
            if topic == OFFSETS_TOPIC and self._on_resigned is not None:
                self._on_resigned(partition)
        loop = asyncio.get_running_loop()
        for part in leaders:
            if part.topic == OFFSETS_TOPIC:
                task = loop.create_task(self._on_elected(part.partition))
                self._loads.add(task)
                task.add_done_callback(self._load_done)

    def _load_done(self, task: asyncio.Task[None]) -> None:
        self._loads.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("Loading an offsets partition failed", exc_info=task.exception())

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> ErrorCode:
        batch = build_batch(records, timestamp_ms=now_ms())
        result = self._replicas.append_records(OFFSETS_TOPIC, partition, batch)
        if result.error is ErrorCode.none:
            self._appended[partition] = result.required_offset
        return result.error

    async def wait_replicated(self, partition: int) -> ErrorCode:
        """Seed 000: a commit is acknowledged once the offsets partition's ISR has it
        (offsets.commit.required.acks=-1), or REQUEST_TIMED_OUT after offsets.commit.timeout.ms."""
        required = self._appended.get(partition, -1)
        if self._config["offsets.commit.required.acks"] != -1 or required < 0:
            return ErrorCode.none
        return await self._replicas.wait_for_acks(
            OFFSETS_TOPIC, partition, required, self._config["offsets.commit.timeout.ms"] / 1000,
            min_insync_replicas=1)

    def read(self, partition: int) -> Iterator[tuple[bytes | None, bytes | None]]:
        """Replay to the log end, as Kafka's loader does (FetchLogEnd), not to the high
        watermark: a new leader's high watermark lags what its ISR acknowledged, and stopping
        there would lose the commits acknowledged last before a failover."""
        part = self._replicas.partition(OFFSETS_TOPIC, partition)
        if part is None:
            return
        offset = part.log.log_start_offset
        end = part.log.log_end_offset
        while offset < end:
            data = part.log.read(offset, _READ_CHUNK, end, min_one_batch=True).read_bytes()
            if not data:
                return
            for header in iter_headers(data):
                if not header.is_control:
                    batch = data[header.position:header.position + header.size]
                    for record in decode_records(batch):
                        if record.offset >= offset:
                            yield record.key, record.value
                offset = header.next_offset

    async def shutdown(self) -> None:
        for task in list(self._loads):
            task.cancel()
