"""Topic administration in ZooKeeper mode: validate here, write znodes, let the controller act.

Kafka's ZooKeeper-mode admin path writes intent, not state: a new topic is its assignment under
``/brokers/topics/[topic]`` (the controller notices, elects leaders and tells the brokers), a
deletion is a child of ``/admin/delete_topics``, new partitions are a longer assignment, config
changes are ``/config/topics/[topic]`` plus a change notification every broker watches. The
validation and the error names are the standalone admin manager's, so clients see the same
answers in both modes.
"""

from __future__ import annotations

import logging
import uuid

from harness.wire.errors import ErrorCode
from reference_broker.config import KafkaConfig
from reference_broker.server import topic_config
from reference_broker.server.admin_manager import (
    AdminError,
    AdminManager,
    NewTopic,
    assign_replicas,
    validate_topic_name,
)
from reference_broker.server.metadata_cache import MetadataCache, PartitionInfo, TopicInfo
from reference_broker.server.replica_manager import ReplicaManager
from reference_broker.server.topic_store import TopicStore
from reference_broker.zk.broker_znodes import ProducerIdBlock
from reference_broker.zk.kafka_zk_client import KafkaZkClient
from reference_broker.zk.topic_zk import TopicExistsError
from reference_broker.zk.topic_znodes import TopicAssignment
from reference_broker.zk.zk_json import uuid_to_base64

log = logging.getLogger("reference_broker.server.zk_admin")


class ZkAdminManager(AdminManager):
    def __init__(self, config: KafkaConfig, cache: MetadataCache, replicas: ReplicaManager,
                 store: TopicStore, zk: KafkaZkClient) -> None:
        super().__init__(config, cache, replicas, store)
        self._zk = zk
        self._block: ProducerIdBlock | None = None
        self._next_id = 0

    def load(self) -> None:
        """Nothing to load: the controller's LeaderAndIsr and UpdateMetadata bring the state."""

    def _live_brokers(self) -> list[int]:
        return self._zk.get_broker_ids()

    def create_topic(self, new: NewTopic, validate_only: bool = False) -> TopicInfo:
        validate_topic_name(new.name)
        if self._cache.topic(new.name) is not None \
                or self._zk.get_topic_assignment(new.name) is not None:
            raise AdminError(ErrorCode.topic_already_exists, f"Topic '{new.name}' already exists.")
        assignment = self._assignment(new)
        try:
            configs = topic_config.validate(new.configs or {})
        except topic_config.InvalidConfig as exc:
            raise AdminError(ErrorCode.invalid_config, str(exc)) from None
        topic_id = uuid.uuid4()
        preview = TopicInfo(new.name, topic_id, {
            p: PartitionInfo(p, -1, 0, tuple(r), tuple(r)) for p, r in assignment.items()},
            dict(configs), internal=new.name.startswith("__"))
        if validate_only:
            return preview
        if configs:
            self._zk.set_topic_config(new.name, configs)
        try:
            self._zk.create_topic_assignment(
                new.name, TopicAssignment.of(assignment, uuid_to_base64(topic_id.bytes)))
        except TopicExistsError:
            raise AdminError(ErrorCode.topic_already_exists,
                             f"Topic '{new.name}' already exists.") from None
        log.info("Created topic %s with %d partition(s) in ZooKeeper", new.name,
                 len(assignment))
        return preview

    def delete_topic(self, name: str) -> uuid.UUID:
        found = self._zk.get_topic_assignment(name)
        if found is None:
            raise AdminError(ErrorCode.unknown_topic_or_partition,
                             "This server does not host this topic-partition.")
        if not self._config["delete.topic.enable"]:
            raise AdminError(ErrorCode.topic_deletion_disabled,
                             "Topic deletion is disabled (delete.topic.enable=false).")
        self._zk.create_delete_topic_request(name)
        topic = self._cache.topic(name)
        log.info("Requested deletion of topic %s", name)
        return topic.topic_id if topic is not None else uuid.UUID(int=0)

    def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                          validate_only: bool) -> None:
        found = self._zk.get_topic_assignment(name)
        if found is None:
            raise AdminError(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist.")
        current_assignment, version = found
        replicas = current_assignment.replicas()
        current = len(replicas)
        if count < current:
            raise AdminError(ErrorCode.invalid_partitions,
                             f"Topic currently has {current} partitions, which is higher than "
                             f"the requested {count}.")
        if count == current:
            raise AdminError(ErrorCode.invalid_partitions,
                             f"Topic already has {current} partitions.")
        brokers = self._live_brokers()
        if assignments:
            if len(assignments) != count - current:
                raise AdminError(ErrorCode.invalid_replica_assignment,
                                 f"Increasing the number of partitions by {count - current} but "
                                 f"{len(assignments)} assignments provided.")
            unknown = sorted({b for a in assignments for b in a} - set(brokers))
            if unknown:
                raise AdminError(ErrorCode.invalid_replica_assignment,
                                 f"Unknown broker(s) {unknown} in the assignment")
            extra = dict(enumerate(assignments, start=current))
        else:
            full = assign_replicas(brokers, count, len(replicas[0]))
            extra = {p: full[p] for p in range(current, count)}
        if validate_only:
            return
        replicas.update(extra)
        self._zk.set_topic_assignment(
            name, TopicAssignment.of(replicas, current_assignment.topic_id), version)

    def alter_topic_configs(self, name: str, configs: dict[str, str], validate_only: bool) -> None:
        if self._zk.get_topic_assignment(name) is None:
            raise AdminError(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist.")
        try:
            normalized = topic_config.validate(configs)
        except topic_config.InvalidConfig as exc:
            raise AdminError(ErrorCode.invalid_config, str(exc)) from None
        if validate_only:
            return
        self._zk.set_topic_config(name, normalized)

    def topic_configs(self, name: str) -> dict[str, str]:
        if self._zk.get_topic_assignment(name) is None:
            raise AdminError(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist.")
        return self._zk.get_topic_config(name)

    def next_producer_id(self) -> int:
        """Producer ids come from blocks claimed in ZooKeeper, unique across the cluster."""
        if self._block is None or self._next_id > self._block.block_end:
            self._block = self._zk.claim_producer_id_block(self._config.broker_id)
            self._next_id = self._block.block_start
        self._next_id += 1
        return self._next_id - 1
