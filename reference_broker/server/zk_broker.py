"""The broker's ZooKeeper-mode half: registration, the controller's requests, ISR writes.

In ZooKeeper mode a broker learns everything about the cluster from the controller:
LeaderAndIsr tells it which partitions it leads or follows, UpdateMetadata what every broker
should answer to Metadata, StopReplica which replicas to drop. Requests from a controller whose
epoch is older than one already heard from are refused with STALE_CONTROLLER_EPOCH, which is
what fences a deposed controller that has not noticed yet. The controller's requests run one at
a time in arrival order, as Kafka's single request-handler queue for them does.

A leader writes its own ISR changes to the partition's state znode — conditional on the znode
version it was given — and then announces them under ``/isr_change_notification`` so the
controller can tell the other brokers.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections.abc import Callable
from typing import Any

from harness.wire.errors import ErrorCode
from reference_broker.cluster.partition import Partition
from reference_broker.config import KafkaConfig
from reference_broker.log.topic_partition import TopicPartition
from reference_broker.network.tasks import cancel_and_wait
from reference_broker.server import topic_config
from reference_broker.server.metadata_cache import (
    BrokerEndpoint,
    MetadataCache,
    PartitionInfo,
    TopicInfo,
)
from reference_broker.server.replica_manager import PartitionState, ReplicaManager, current_ms
from reference_broker.server.request_order import ConnectionOrder
from reference_broker.zk.broker_znodes import BrokerInfo, EndPoint
from reference_broker.zk.kafka_zk_client import KafkaZkClient
from reference_broker.zk.topic_zk import PartitionStateConflictError
from reference_broker.zk.topic_znodes import LeaderIsrAndControllerEpoch

log = logging.getLogger("reference_broker.server.zk_broker")

LEADER_DURING_DELETE = -2
ISR_NOTIFICATION_DELAY_S = 0.1

# (partitions this broker now leads, partitions it now follows or dropped) → side effects
LeadershipListener = Callable[[list[Partition], list[tuple[str, int]]], None]
# Told the partitions an UpdateMetadata named as deleted (the group coordinator drops their
# offsets, as Kafka's handleUpdateMetadataRequest → GroupCoordinator.onPartitionsDeleted).
DeletionListener = Callable[[list[tuple[str, int]]], None]


def topic_id_from_zk(text: str | None) -> uuid.UUID:
    if not text:
        return uuid.UUID(int=0)
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


class ZkBroker:
    def __init__(self, config: KafkaConfig, zk: KafkaZkClient) -> None:
        self.config = config
        self.zk = zk
        self.broker_epoch = -1
        self.cache: MetadataCache | None = None
        self.replicas: ReplicaManager | None = None
        self.leadership_listeners: list[LeadershipListener] = []
        self.deletion_listeners: list[DeletionListener] = []
        self._order = ConnectionOrder()
        self._topic_details: dict[str, tuple[uuid.UUID, dict[str, str]]] = {}
        self._isr_changes: set[TopicPartition] = set()
        self._isr_flush: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task] = set()

    # --- start-up -------------------------------------------------------------------------------

    @classmethod
    async def connect(cls, config: KafkaConfig) -> ZkBroker:
        zk = KafkaZkClient(config["zookeeper.connect"],
                           session_timeout_ms=config["zookeeper.session.timeout.ms"])
        await asyncio.to_thread(zk.start, config["zookeeper.connection.timeout.ms"] / 1000)
        return cls(config, zk)

    async def cluster_id(self, proposed: str | None) -> str:
        return await asyncio.to_thread(self.zk.get_or_create_cluster_id, proposed)

    def attach(self, cache: MetadataCache, replicas: ReplicaManager) -> None:
        self.cache = cache
        self.replicas = replicas
        replicas.isr_writer = self.write_isr

    async def register(self, advertised: list[tuple[str, str, int]]) -> int:
        """Create ``/brokers/ids/[id]``; the broker epoch (BrokerIdInUseError on a duplicate)."""
        info = BrokerInfo(self.config.broker_id,
                          tuple(EndPoint(name, host, port) for name, host, port in advertised))
        self.broker_epoch = await asyncio.to_thread(self.zk.register_broker, info)
        loop = asyncio.get_running_loop()

        def on_new_session() -> None:  # kazoo thread: the client re-registered us already
            found = self.zk.get_broker_and_epoch(self.config.broker_id)
            if found is not None:
                loop.call_soon_threadsafe(setattr, self, "broker_epoch", found[1])

        self.zk.add_session_handlers(on_new_session=on_new_session)
        log.info("Registered broker %d in ZooKeeper (broker epoch %d)", self.config.broker_id,
                 self.broker_epoch)
        return self.broker_epoch

    def address_of(self, broker_id: int) -> tuple[str, int] | None:
        """Where to reach a peer: the configured override (a proxy), else its registration."""
        override = self.config["broker.peer.addresses"].get(broker_id)
        if override is not None:
            return override
        broker = self.cache.broker(broker_id) if self.cache is not None else None
        return None if broker is None else (broker.host, broker.port)

    def partition_count(self, topic: str) -> int | None:
        """Blocking: the partition count of an existing topic (None when it does not exist)."""
        found = self.zk.get_topic_assignment(topic)
        return None if found is None else len(found[0].partitions)

    def watch_config_changes(self, loop: asyncio.AbstractEventLoop) -> None:
        """Reload a topic's overrides whenever a config change notification names it."""
        seen: set[str] = set()

        def on_notifications(notifications: list[tuple[str, str, str]]) -> None:  # kazoo thread
            for sequence, entity_type, name in notifications:
                if sequence in seen:
                    continue
                seen.add(sequence)
                if entity_type == "topics":
                    configs = self.zk.get_topic_config(name)
                    loop.call_soon_threadsafe(self.topic_configs_changed, name, configs)

        self.zk.watch_config_changes(on_notifications)

    # --- topic ids and configs, read from ZooKeeper once per topic -----------------------------

    async def topic_details(self, topic: str) -> tuple[uuid.UUID, dict[str, str]]:
        known = self._topic_details.get(topic)
        if known is not None:
            return known

        def read() -> tuple[uuid.UUID, dict[str, str]]:
            found = self.zk.get_topic_assignment(topic)
            topic_id = topic_id_from_zk(found[0].topic_id if found else None)
            return topic_id, self.zk.get_topic_config(topic)

        details = await asyncio.to_thread(read)
        self._topic_details[topic] = details
        return details

    def topic_configs_changed(self, topic: str, configs: dict[str, str]) -> None:
        known = self._topic_details.get(topic)
        if known is not None:
            self._topic_details[topic] = (known[0], configs)
        if self.cache is not None:
            info = self.cache.topic(topic)
            if info is not None:
                self.cache.put_topic(TopicInfo(info.name, info.topic_id, info.partitions,
                                               dict(configs), info.internal))
        if self.replicas is not None:
            self.replicas.update_log_config(topic, topic_config.log_config(self.config, configs))

    # --- controller requests ----------------------------------------------------------------

    def serialized(self, action: Callable[[], Any]) -> Any:
        return self._order.run(0, action)

    def _fenced(self, body: Any) -> ErrorCode | None:
        assert self.replicas is not None
        if body.controller_epoch < self.replicas.controller_epoch:
            log.warning("Refusing a request of controller %d at epoch %d: epoch %d is current",
                        body.controller_id, body.controller_epoch,
                        self.replicas.controller_epoch)
            return ErrorCode.stale_controller_epoch
        broker_epoch = getattr(body, "broker_epoch", -1)
        if 0 <= broker_epoch < self.broker_epoch:
            return ErrorCode.stale_broker_epoch
        self.replicas.check_controller_epoch(body.controller_epoch)
        return None

    async def leader_and_isr(self, body: Any) -> dict[str, Any]:
        assert self.replicas is not None
        fenced = self._fenced(body)
        if fenced is not None:
            return {"error_code": fenced, "partition_errors": []}
        states: list[PartitionState] = []
        for topic_state in body.topic_states:
            for p in topic_state.partition_states:
                states.append(PartitionState(
                    topic_state.topic_name, p.partition_index, p.controller_epoch, p.leader,
                    p.leader_epoch, tuple(p.isr), p.zk_version, tuple(p.replicas), p.is_new))
        configs = {}
        for topic in {s.topic for s in states}:
            configs[topic] = (await self.topic_details(topic))[1]
        change = self.replicas.become_leader_or_follower(
            states, lambda t: topic_config.log_config(self.config, configs[t]), current_ms())
        left = [(p.topic, p.partition) for p in change.new_followers]
        for listener in self.leadership_listeners:
            listener(change.new_leaders, left)
        return {"error_code": ErrorCode.none, "partition_errors": [
            {"topic_name": t, "partition_index": p, "error_code": e}
            for (t, p), e in change.errors.items()]}

    async def update_metadata(self, body: Any) -> dict[str, Any]:
        assert self.cache is not None
        fenced = self._fenced(body)
        if fenced is not None:
            return {"error_code": fenced}
        listener = self.config.advertised_listeners[0].listener
        brokers = []
        for b in body.live_brokers:
            endpoints = {e.listener: e for e in b.endpoints}
            e = endpoints.get(listener) or next(iter(endpoints.values()), None)
            if e is not None:
                brokers.append(BrokerEndpoint(b.id, e.host, e.port, b.rack))
        self.cache.set_brokers(brokers)
        self.cache.controller_id = body.controller_id
        deleted: list[tuple[str, int]] = []
        for topic_state in body.topic_states:
            name = topic_state.topic_name
            existing = self.cache.topic(name)
            partitions = dict(existing.partitions) if existing is not None else {}
            for p in topic_state.partition_states:
                if p.leader == LEADER_DURING_DELETE:
                    partitions.pop(p.partition_index, None)
                    deleted.append((name, p.partition_index))
                    continue
                partitions[p.partition_index] = PartitionInfo(
                    p.partition_index, p.leader, p.leader_epoch, tuple(p.replicas),
                    tuple(p.isr), tuple(p.offline_replicas))
            if not partitions:
                self.cache.remove_topic(name)
                self._topic_details.pop(name, None)
                continue
            if existing is None:
                topic_id, configs = await self.topic_details(name)
                self.cache.put_topic(TopicInfo(name, topic_id, partitions, dict(configs),
                                               internal=name.startswith("__")))
            else:
                self.cache.put_topic(existing.with_partitions(partitions))
        if deleted:
            for deletion_listener in self.deletion_listeners:
                deletion_listener(deleted)
        return {"error_code": ErrorCode.none}

    async def stop_replica(self, body: Any) -> dict[str, Any]:
        assert self.replicas is not None
        fenced = self._fenced(body)
        if fenced is not None:
            return {"error_code": fenced, "partition_errors": []}
        errors = []
        dropped = []
        for topic_state in body.topic_states:
            for p in topic_state.partition_states:
                error = self.replicas.stop_replica(topic_state.topic_name, p.partition_index,
                                                   p.delete_partition)
                dropped.append((topic_state.topic_name, p.partition_index))
                if p.delete_partition:
                    self._topic_details.pop(topic_state.topic_name, None)
                errors.append({"topic_name": topic_state.topic_name,
                               "partition_index": p.partition_index, "error_code": error})
        for listener in self.leadership_listeners:
            listener([], dropped)
        return {"error_code": ErrorCode.none, "partition_errors": errors}

    # --- ISR changes ------------------------------------------------------------------------

    async def write_isr(self, partition: Partition, new_isr: tuple[int, ...]) -> int | None:
        tp = TopicPartition(partition.topic, partition.partition)
        state = LeaderIsrAndControllerEpoch(self.config.broker_id, partition.leader_epoch,
                                            new_isr, partition.controller_epoch)
        try:
            version = await asyncio.to_thread(self.zk.update_partition_state, tp, state,
                                              partition.zk_version)
        except PartitionStateConflictError:
            current = await asyncio.to_thread(self.zk.get_partition_state, tp)
            if current is not None:
                written, version = current
                if written.leader == self.config.broker_id \
                        and written.leader_epoch == partition.leader_epoch:
                    # Only the version was stale (the controller wrote the same leadership):
                    # adopt it; the next check retries the change.
                    partition.zk_version = version
            log.info("ISR update of %s lost to a newer partition state; waiting for the "
                     "controller", partition)
            return None
        self._isr_changes.add(tp)
        self._schedule_isr_notification()
        return version

    def _schedule_isr_notification(self) -> None:
        if self._isr_flush is not None:
            return
        loop = asyncio.get_running_loop()
        self._isr_flush = loop.call_later(ISR_NOTIFICATION_DELAY_S, self._flush_isr_changes)

    def _flush_isr_changes(self) -> None:
        self._isr_flush = None
        changes, self._isr_changes = set(self._isr_changes), set()
        if not changes:
            return

        async def write() -> None:
            try:
                await asyncio.to_thread(self.zk.create_isr_change_notification, changes)
            except Exception:
                log.exception("Could not announce ISR changes of %d partition(s)", len(changes))

        task = asyncio.get_running_loop().create_task(write())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def shutdown(self) -> None:
        if self._isr_flush is not None:
            self._isr_flush.cancel()
        for task in list(self._tasks):
            await cancel_and_wait(task)
        await asyncio.to_thread(self.zk.close)
