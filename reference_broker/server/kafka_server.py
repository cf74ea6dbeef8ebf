"""Wires the broker together and runs its lifecycle: start-up, periodic log tasks, shutdown."""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import replace

from reference_broker.config import KafkaConfig
from reference_broker.controller.kafka_controller import KafkaController
from reference_broker.coordinator.group.group_coordinator import GroupConfig, GroupCoordinator
from reference_broker.coordinator.group.group_metadata_manager import GroupMetadataManager
from reference_broker.coordinator.group.offset_commits import OffsetCommits
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


class KafkaServer:
    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.bound_ports: dict[str, int] = {}
        self._tasks: list[asyncio.Task] = []
        self._log_manager: LogManager | None = None
        self._socket_server: SocketServer | None = None
        self._offsets_topic: OffsetsTopic | None = None
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
            offsets_count = await asyncio.to_thread(zk_broker.partition_count, OFFSETS_TOPIC)
        else:
            admin = AdminManager(config, cache, replicas, store)
            stored_offsets = store.topics.get(OFFSETS_TOPIC)
            offsets_count = len(stored_offsets.assignment) if stored_offsets else None
        offsets_topic = self._offsets_topic = OffsetsTopic(config, admin, cache, replicas)
        groups = GroupMetadataManager(
            offsets_topic.partition_count(offsets_count),
            offsets_topic.append, offsets_topic.read,
            load_delay_ms=config["group.coordinator.load.delay.ms"])
        group_config = group_config_of(config)
        coordinator = GroupCoordinator(groups, group_config)
        services = BrokerServices(config, cache, replicas, admin, offsets_topic, coordinator,
                                  OffsetCommits(groups, group_config), zk_broker=zk_broker)
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
            await self._start_zk_mode(zk_broker, services, advertised)
        else:
            first = advertised[0]
            cache.set_brokers([BrokerEndpoint(config.broker_id, first.host, first.port)])
            admin.load()
            offsets_topic.start(coordinator.on_elected, coordinator.on_resigned)
        self._every(config["log.retention.check.interval.ms"] / 1000, manager.cleanup_logs)
        self._every(config["log.flush.scheduler.interval.ms"] / 1000, manager.flush_dirty_logs)
        self._every(CHECKPOINT_INTERVAL_S, lambda _now: manager.checkpoint_recovery_points())
        if config["log.cleaner.enable"]:
            self._every(config["log.cleaner.backoff.ms"] / 1000,
                        lambda now: clean_logs(manager.all_logs(), now))
        self._every(config["offsets.retention.check.interval.ms"] / 1000,
                    lambda _now: groups.expire_offsets(group_config.offsets_retention_ms))
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
        if self._zk_broker is not None:
            await self._zk_broker.shutdown()
        if self._log_manager is not None:
            if self._zk_broker is not None and self._replicas is not None:
                self._log_manager.checkpoint_high_watermarks(self._replicas.high_watermarks())
            self._log_manager.shutdown()
        log.info("Shut down cleanly")
