"""Topic administration: create, delete, add partitions, alter configs — validated as Kafka does.

Validation answers with Kafka's error names (INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS,
INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_CONFIG, INVALID_REPLICA_ASSIGNMENT)
before anything is written. In standalone mode the result is persisted in the TopicStore and
applied to the metadata cache and replica manager right away.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace

from harness.wire.errors import ErrorCode
from reference_broker.config import KafkaConfig
from reference_broker.server import topic_config
from reference_broker.server.metadata_cache import MetadataCache, PartitionInfo, TopicInfo
from reference_broker.server.replica_manager import ReplicaManager
from reference_broker.server.topic_store import StoredTopic, TopicStore

log = logging.getLogger("reference_broker.server.admin")

MAX_NAME_LENGTH = 249
MAX_PRODUCER_EPOCH = 32766
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


class AdminError(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def validate_topic_name(name: str) -> None:
    if not name:
        raise AdminError(ErrorCode.invalid_topic_exception,
                         "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise AdminError(ErrorCode.invalid_topic_exception, f"Topic name cannot be {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise AdminError(ErrorCode.invalid_topic_exception,
                         f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} "
                         "characters")
    if not _LEGAL.match(name):
        raise AdminError(ErrorCode.invalid_topic_exception,
                         f"Topic name {name!r} is illegal, it contains a character other than "
                         "ASCII alphanumerics, '.', '_' and '-'")


@dataclass(frozen=True)
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: Mapping[int, list[int]] | None = None
    configs: Mapping[str, str | None] | None = None


class AdminManager:
    def __init__(self, config: KafkaConfig, cache: MetadataCache, replicas: ReplicaManager,
                 store: TopicStore) -> None:
        self._config = config
        self._cache = cache
        self._replicas = replicas
        self._store = store
        self._producer_epochs: dict[int, int] = {}

    def load(self) -> None:
        """Recreate every stored topic in the cache and as local leaders (broker start-up)."""
        for stored in self._store.topics.values():
            self._apply(stored, leader_epoch=0)

    def _apply(self, stored: StoredTopic, leader_epoch: int) -> TopicInfo:
        live = {b.broker_id for b in self._cache.brokers()}
        partitions = {}
        for p, replicas in stored.assignment.items():
            leader = next((r for r in replicas if r in live), -1)
            isr = tuple(r for r in replicas if r in live)
            partitions[p] = PartitionInfo(p, leader, leader_epoch, tuple(replicas), isr)
        topic = TopicInfo(stored.name, stored.topic_id, partitions, dict(stored.configs),
                          internal=stored.name.startswith("__"))
        self._cache.put_topic(topic)
        self._replicas.become_leader(topic, topic_config.log_config(self._config, topic.configs))
        return topic

    def create_topic(self, new: NewTopic, validate_only: bool = False) -> TopicInfo:
        validate_topic_name(new.name)
        if self._cache.topic(new.name) is not None:
            raise AdminError(ErrorCode.topic_already_exists, f"Topic '{new.name}' already exists.")
        assignment = self._assignment(new)
        try:
            configs = topic_config.validate(new.configs or {})
        except topic_config.InvalidConfig as exc:
            raise AdminError(ErrorCode.invalid_config, str(exc)) from None
        stored = StoredTopic(new.name, uuid.uuid4(), assignment, configs)
        if validate_only:
            return self._preview(stored)
        self._store.put(stored)
        log.info("Created topic %s with %d partition(s)", new.name, len(assignment))
        return self._apply(stored, leader_epoch=0)

    def _preview(self, stored: StoredTopic) -> TopicInfo:
        parts = {p: PartitionInfo(p, r[0], 0, tuple(r), tuple(r))
                 for p, r in stored.assignment.items()}
        return TopicInfo(stored.name, stored.topic_id, parts, stored.configs)

    def _live_brokers(self) -> list[int]:
        return [b.broker_id for b in self._cache.brokers()]

    def _assignment(self, new: NewTopic) -> dict[int, list[int]]:
        brokers = self._live_brokers()
        if new.assignments:
            if new.num_partitions != -1 or new.replication_factor != -1:
                raise AdminError(ErrorCode.invalid_request,
                                 "Both numPartitions or replicationFactor "
                                 "and replicasAssignments were set.")
            out = {}
            for p, replicas in new.assignments.items():
                if not replicas or len(set(replicas)) != len(replicas):
                    raise AdminError(ErrorCode.invalid_replica_assignment,
                                     f"Invalid replica list for partition {p}: {replicas}")
                unknown = [r for r in replicas if r not in brokers]
                if unknown:
                    raise AdminError(ErrorCode.invalid_replica_assignment,
                                     f"Unknown broker(s) {unknown} in the assignment")
                out[p] = list(replicas)
            if sorted(out) != list(range(len(out))):
                raise AdminError(ErrorCode.invalid_replica_assignment,
                                 "Partitions must be numbered consecutively from 0")
            return out
        partitions = self._config["num.partitions"] if new.num_partitions == -1 \
            else new.num_partitions
        rf = self._config["default.replication.factor"] if new.replication_factor == -1 \
            else new.replication_factor
        if partitions <= 0:
            raise AdminError(ErrorCode.invalid_partitions,
                             "Number of partitions must be larger than 0.")
        if rf <= 0:
            raise AdminError(ErrorCode.invalid_replication_factor,
                             "Replication factor must be larger than 0.")
        if rf > len(brokers):
            raise AdminError(ErrorCode.invalid_replication_factor,
                             f"Replication factor: {rf} larger than available brokers: "
                             f"{len(brokers)}.")
        return assign_replicas(brokers, partitions, rf)

    def delete_topic(self, name: str) -> uuid.UUID:
        topic = self._cache.topic(name)
        if topic is None:
            raise AdminError(ErrorCode.unknown_topic_or_partition,
                             "This server does not host this topic-partition.")
        self._store.delete(name)
        self._cache.remove_topic(name)
        self._replicas.delete_topic(name)
        log.info("Deleted topic %s", name)
        return topic.topic_id

    def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                          validate_only: bool) -> None:
        topic = self._cache.topic(name)
        stored = self._store.topics.get(name)
        if topic is None or stored is None:
            raise AdminError(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist.")
        current = len(stored.assignment)
        if count < current:
            raise AdminError(ErrorCode.invalid_partitions,
                             f"Topic currently has {current} partitions, which is higher than "
                             f"the requested {count}.")
        if count == current:
            raise AdminError(ErrorCode.invalid_partitions,
                             f"Topic already has {current} partitions.")
        rf = len(stored.assignment[0])
        brokers = [b.broker_id for b in self._cache.brokers()]
        if assignments:
            if len(assignments) != count - current:
                raise AdminError(ErrorCode.invalid_replica_assignment,
                                 f"Increasing the number of partitions by {count - current} but "
                                 f"{len(assignments)} assignments provided.")
            extra = dict(enumerate(assignments, start=current))
        else:
            full = assign_replicas(brokers, count, rf)
            extra = {p: full[p] for p in range(current, count)}
        if validate_only:
            return
        stored.assignment.update(extra)
        self._store.put(stored)
        self._apply(stored, leader_epoch=0)

    def alter_topic_configs(self, name: str, configs: dict[str, str], validate_only: bool) -> None:
        stored = self._store.topics.get(name)
        if stored is None:
            raise AdminError(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist.")
        try:
            normalized = topic_config.validate(configs)
        except topic_config.InvalidConfig as exc:
            raise AdminError(ErrorCode.invalid_config, str(exc)) from None
        if validate_only:
            return
        stored.configs = normalized
        self._store.put(stored)
        topic = self._cache.topic(name)
        if topic is not None:
            self._cache.put_topic(replace(topic, configs=dict(normalized)))
        self._replicas.update_log_config(name, topic_config.log_config(self._config, normalized))

    def topic_configs(self, name: str) -> dict[str, str]:
        stored = self._store.topics.get(name)
        if stored is None:
            raise AdminError(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist.")
        return dict(stored.configs)

    def init_producer_id(self, producer_id: int, epoch: int) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch): a new id, or KIP-360's epoch bump of a known one."""
        if producer_id >= 0:
            current = self._producer_epochs.get(producer_id)
            if current is not None and current != epoch:
                return ErrorCode.invalid_producer_epoch, -1, -1
            if epoch < MAX_PRODUCER_EPOCH:
                self._producer_epochs[producer_id] = epoch + 1
                return ErrorCode.none, producer_id, epoch + 1
        new_id = self.next_producer_id()
        self._producer_epochs[new_id] = 0
        return ErrorCode.none, new_id, 0


    def next_producer_id(self) -> int:
        return self._store.next_producer_id()


def assign_replicas(brokers: list[int], partitions: int, replication_factor: int,
                    start_index: int = 0) -> dict[int, list[int]]:
    """Partition i's j-th replica on broker (start + i + j) mod n: Kafka's round-robin shape."""
    ordered = sorted(brokers)
    n = len(ordered)
    return {
        p: [ordered[(start_index + p + j) % n] for j in range(replication_factor)]
        for p in range(partitions)
    }
