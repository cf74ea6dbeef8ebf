"""Wires the broker together and runs its lifecycle: start-up, periodic log tasks, shutdown."""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from reference_broker.config import KafkaConfig
from reference_broker.controller.kafka_controller import KafkaController
from reference_broker.coordinator.group.group_coordinator import GroupConfig, GroupCoordinator
from reference_broker.coordinator.group.group_metadata_manager import GroupMetadataManager
from reference_broker.coordinator.group.offset_commits import OffsetCommits
from reference_broker.coordinator.transaction.transaction_coordinator import (
    TransactionConfig,
    TransactionCoordinator,
)
from reference_broker.coordinator.transaction.transaction_state_manager import (
    TransactionStateManager,
)
from reference_broker.log import log_dir_failure
from reference_broker.log.cleaner import clean_logs
from reference_broker.log.log_manager import LogManager
from reference_broker.network.socket_server import SocketServer
from reference_broker.server import topic_config
from reference_broker.server.admin_manager import AdminManager
from reference_broker.server.broker_services import BrokerServices
from reference_broker.server.controlled_shutdown import controlled_shutdown
from reference_broker.server.fetcher import ReplicaFetcherManager
from reference_broker.server.kafka_apis import KafkaApis
from reference_broker.server.metadata_cache import BrokerEndpoint, MetadataCache
from reference_broker.server.offsets_topic import OFFSETS_TOPIC, OffsetsTopic
from reference_broker.server.replica_manager import ReplicaManager
from reference_broker.server.topic_store import TopicStore
from reference_broker.server.transaction_marker_channel import TransactionMarkerChannelManager
from reference_broker.server.transaction_state_topic import (
    TRANSACTION_STATE_TOPIC,
    TransactionStateTopic,
)
from reference_broker.server.transaction_verification import TransactionVerifier
from reference_broker.server.zk_admin_manager import ZkAdminManager
from reference_broker.server.zk_broker import ZkBroker

log = logging.getLogger("reference_broker.server")

CHECKPOINT_INTERVAL_S = 60.0


def new_cluster_id() -> str:
    """22 characters of URL-safe base64 of a random UUID, as Kafka generates cluster ids."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def group_config_of(config: KafkaConfig) -> GroupConfig:
    return GroupConfig(
        initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
        min_session_timeout_ms=config["group.min.session.timeout.ms"],
        max_session_timeout_ms=config["group.max.session.timeout.ms"],
        max_size=config["group.max.size"],
        offsets_retention_ms=config["offsets.retention.minutes"] * 60_000,
        offset_metadata_max_bytes=config["offset.metadata.max.bytes"],
    )


async def _stored_partition_count(zk_broker: ZkBroker | None, store: TopicStore,
                                  topic: str) -> int | None:
    """An internal topic's partition count if it exists (it wins over the config)."""
    if zk_broker is not None:
        return await asyncio.to_thread(zk_broker.partition_count, topic)
    stored = store.topics.get(topic)
    return len(stored.assignment) if stored else None


class KafkaServer:
    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.bound_ports: dict[str, int] = {}
        self._tasks: list[asyncio.Task] = []
        self._log_manager: LogManager | None = None
        self._socket_server: SocketServer | None = None
        self._offsets_topic: OffsetsTopic | None = None
        self._txn_topic: TransactionStateTopic | None = None
        self._txn_coordinator: TransactionCoordinator | None = None
        self._txn_markers: TransactionMarkerChannelManager | None = None
        self._zk_broker: ZkBroker | None = None
        self._controller: KafkaController | None = None
        self._fetchers: ReplicaFetcherManager | None = None
        self._replicas: ReplicaManager | None = None

    async def startup(self) -> None:
        config = self.config
        default_log_config = topic_config.log_config(config, {})
        self._log_manager = LogManager(list(config.log_dirs), default_log_config,
                                       broker_id=config.broker_id)
        log_dir_failure.install(log_dir_failure.LogDirFailureChannel(list(config.log_dirs)))
        store = TopicStore(config.log_dirs[0])
        zk_broker = None
        if config.zookeeper_mode:
            zk_broker = self._zk_broker = await ZkBroker.connect(config)
            cluster_id = await zk_broker.cluster_id(config["cluster.id"] or store.cluster_id)
        else:
            if store.cluster_id is None:
                store.cluster_id = config["cluster.id"] or new_cluster_id()
                store.save()
            cluster_id = store.cluster_id
        cache = MetadataCache(cluster_id, controller_id=-1 if zk_broker else config.broker_id)
        replicas = self._replicas = ReplicaManager(config.broker_id, self._log_manager)
        if zk_broker is not None:
            admin: AdminManager = ZkAdminManager(config, cache, replicas, store, zk_broker.zk)
        else:
            admin = AdminManager(config, cache, replicas, store)
        offsets_count = await _stored_partition_count(zk_broker, store, OFFSETS_TOPIC)
        offsets_topic = self._offsets_topic = OffsetsTopic(config, admin, cache, replicas)
        groups = GroupMetadataManager(
            offsets_topic.partition_count(offsets_count),
            offsets_topic.append, offsets_topic.read,
            load_delay_ms=config["group.coordinator.load.delay.ms"])
        group_config = group_config_of(config)
        coordinator = GroupCoordinator(groups, group_config)
        txn_topic = self._txn_topic = TransactionStateTopic(config, admin, cache, replicas)
        txn_coordinator = self._txn_coordinator = self._transaction_coordinator(
            txn_topic, await _stored_partition_count(zk_broker, store, TRANSACTION_STATE_TOPIC),
            admin, cache, zk_broker, groups.partition_for)
        services = BrokerServices(config, cache, replicas, admin, offsets_topic, coordinator,
                                  OffsetCommits(groups, group_config), txn_topic,
                                  txn_coordinator, self._verifier(txn_topic, txn_coordinator),
                                  zk_broker=zk_broker)
        apis = KafkaApis(services)
        self._socket_server = SocketServer(apis.handle_frame, config["socket.request.max.bytes"])
        for endpoint in config.listeners:
            self.bound_ports[endpoint.listener] = await self._socket_server.bind(
                endpoint.listener, endpoint.host, endpoint.port)
        advertised = [replace(e, port=self.bound_ports.get(e.listener, e.port)) if e.port == 0
                      else e for e in config.advertised_listeners]
        manager = self._log_manager
        if zk_broker is not None:
            offsets_topic.start(coordinator.on_elected, coordinator.on_resigned)
            txn_topic.start(txn_coordinator.on_elected, txn_coordinator.on_resigned)
            await self._start_zk_mode(zk_broker, services, advertised)
        else:
            first = advertised[0]
            cache.set_brokers([BrokerEndpoint(config.broker_id, first.host, first.port)])
            admin.load()
            offsets_topic.start(coordinator.on_elected, coordinator.on_resigned)
            txn_topic.start(txn_coordinator.on_elected, txn_coordinator.on_resigned)
        self._every(config["log.retention.check.interval.ms"] / 1000, manager.cleanup_logs)
        self._every(config["log.flush.scheduler.interval.ms"] / 1000, manager.flush_dirty_logs)
        self._every(CHECKPOINT_INTERVAL_S, lambda _now: manager.checkpoint_recovery_points())
        if config["log.cleaner.enable"]:
            self._every(config["log.cleaner.backoff.ms"] / 1000,
                        lambda now: clean_logs(manager.all_logs(), now))
        self._every(config["offsets.retention.check.interval.ms"] / 1000,
                    lambda _now: groups.expire_offsets(group_config.offsets_retention_ms))
        self._every(config["transaction.abort.timed.out.transaction.cleanup.interval.ms"] / 1000,
                    txn_coordinator.abort_timed_out)
        log.info("Reference broker %d started (cluster %s), advertising %s", config.broker_id,
                 cluster_id, ", ".join(f"{e.host}:{e.port}" for e in advertised))

    async def _start_zk_mode(self, zk_broker: ZkBroker, services: BrokerServices,
                             advertised: list) -> None:
        config = self.config
        replicas = services.replica_manager
        zk_broker.attach(services.metadata_cache, replicas)
        replicas.fetchers = self._fetchers = ReplicaFetcherManager(
            config.broker_id, config, zk_broker.address_of)
        zk_broker.leadership_listeners.append(services.offsets_topic.on_leadership)
        zk_broker.leadership_listeners.append(services.transaction_topic.on_leadership)
        zk_broker.deletion_listeners.append(services.group_coordinator.on_partitions_deleted)
        zk_broker.watch_config_changes(asyncio.get_running_loop())
        broker_epoch = await zk_broker.register(
            [(e.listener, e.host, e.port) for e in advertised])
        controller = self._controller = KafkaController(config, zk_broker.zk, broker_epoch)
        services.controller = controller
        await controller.startup()
        lag_ms = config["replica.lag.time.max.ms"]
        self._every(max(lag_ms / 2000, 0.05), lambda now: replicas.maybe_shrink_isr(lag_ms, now))
        manager = self._log_manager
        assert manager is not None
        self._every(config["replica.high.watermark.checkpoint.interval.ms"] / 1000,
                    lambda _now: manager.checkpoint_high_watermarks(replicas.high_watermarks()))

    def _transaction_coordinator(self, txn_topic: TransactionStateTopic, stored: int | None,
                                 admin: AdminManager, cache: MetadataCache, zk_broker: Any,
                                 offsets_partition_for: Callable[[str], int]
                                 ) -> TransactionCoordinator:
        """The transaction coordinator on `__transaction_state`, its markers sent to leaders
        at their peer address (a proxy, when the harness set one) with the transaction
        partition's leader epoch as the coordinator epoch."""
        config = self.config
        manager = TransactionStateManager(txn_topic.partition_count(stored),
                                          txn_topic.append_replicated, txn_topic.read)

        def registered(broker_id: int) -> tuple[str, int] | None:
            broker = cache.broker(broker_id)
            return None if broker is None else (broker.host, broker.port)

        def coordinator_epoch(transactional_id: str) -> int:
            info = txn_topic.leader_of(manager.partition_for(transactional_id))
            return 0 if info is None else max(info.leader_epoch, 0)

        markers = self._txn_markers = TransactionMarkerChannelManager(
            config.broker_id, cache, zk_broker.address_of if zk_broker else registered,
            coordinator_epoch, request_timeout_s=config["request.timeout.ms"] / 1000)
        return TransactionCoordinator(
            manager, TransactionConfig(max_timeout_ms=config["transaction.max.timeout.ms"]),
            admin.next_producer_id, offsets_partition_for, markers)

    def _verifier(self, txn_topic: TransactionStateTopic,
                  coordinator: TransactionCoordinator) -> TransactionVerifier:
        """KIP-890's verification, asking the leader of the transactional id's
        `__transaction_state` partition over the markers' clients (the same peers)."""
        markers = self._txn_markers
        assert markers is not None

        def coordinator_of(transactional_id: str) -> int | None:
            info = txn_topic.leader_of(coordinator.manager.partition_for(transactional_id))
            return None if info is None or info.leader < 0 else info.leader

        return TransactionVerifier(self.config.broker_id, coordinator, coordinator_of,
                                   markers.client_for)

    def _every(self, interval_s: float, action: Callable[[int], object]) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_s)
                try:
                    action(int(time.time() * 1000))
                except Exception as exc:
                    log_dir_failure.handle(exc, "running a periodic log task")
                    log.exception("Periodic log task failed")

        self._tasks.append(asyncio.get_running_loop().create_task(loop()))

    async def shutdown(self) -> None:
        log.info("Shutting down")
        if self._zk_broker is not None and self._zk_broker.broker_epoch >= 0 \
                and self.config["controlled.shutdown.enable"]:
            # Only a broker that registered may ask: a duplicate broker.id that failed to start
            # must not move the real broker's leaderships away.
            await controlled_shutdown(self.config, self._zk_broker, self._controller)
        for task in self._tasks:
            task.cancel()
        if self._socket_server is not None:
            await self._socket_server.shutdown()
        if self._fetchers is not None:
            await self._fetchers.shutdown()
        if self._controller is not None:
            await self._controller.shutdown()
        if self._replicas is not None:
            await self._replicas.shutdown()
        if self._offsets_topic is not None:
            await self._offsets_topic.shutdown()
        if self._txn_coordinator is not None:
            await self._txn_coordinator.shutdown()
        if self._txn_markers is not None:
            await self._txn_markers.shutdown()
        if self._txn_topic is not None:
            await self._txn_topic.shutdown()
        if self._zk_broker is not None:
            await self._zk_broker.shutdown()
        if self._log_manager is not None:
            if self._zk_broker is not None and self._replicas is not None:
                self._log_manager.checkpoint_high_watermarks(self._replicas.high_watermarks())
            self._log_manager.shutdown()
        log.info("Shut down cleanly")
