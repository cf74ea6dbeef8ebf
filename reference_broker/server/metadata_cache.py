"""What this broker believes about the cluster: brokers, topics, partition leaders and ISRs.

Kafka's brokers fill their MetadataCache from the controller's UpdateMetadata requests; in
standalone mode the admin manager fills it directly. Either way request handlers read only
this cache, so moving to ZooKeeper mode changes who writes it, not who reads it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class BrokerEndpoint:
    broker_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionInfo]
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False

    def with_partitions(self, partitions: dict[int, PartitionInfo]) -> TopicInfo:
        return replace(self, partitions=partitions)


class MetadataCache:
    """Plain data with change watchers: a request parked until the cache shows something (a
    created topic's leaders, a deleted topic's absence — Kafka's topic purgatory) registers a
    callable and is woken on every topic change instead of polling."""

    def __init__(self, cluster_id: str, controller_id: int) -> None:
        self.cluster_id = cluster_id
        self.controller_id = controller_id
        self._brokers: dict[int, BrokerEndpoint] = {}
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self._watchers: list[Callable[[], None]] = []

    def watch(self, on_change: Callable[[], None]) -> Callable[[], None]:
        """Call ``on_change`` after every topic change from now on; returns the unwatch."""
        self._watchers.append(on_change)
        return lambda: self._watchers.remove(on_change)

    def _changed(self) -> None:
        for on_change in list(self._watchers):
            on_change()

    def set_brokers(self, brokers: list[BrokerEndpoint]) -> None:
        self._brokers = {b.broker_id: b for b in brokers}

    def brokers(self) -> list[BrokerEndpoint]:
        return sorted(self._brokers.values(), key=lambda b: b.broker_id)

    def broker(self, broker_id: int) -> BrokerEndpoint | None:
        return self._brokers.get(broker_id)

    def put_topic(self, topic: TopicInfo) -> None:
        old = self._topics.get(topic.name)
        if old is not None:
            self._by_id.pop(old.topic_id, None)
        self._topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic
        self._changed()

    def remove_topic(self, name: str) -> TopicInfo | None:
        topic = self._topics.pop(name, None)
        if topic is not None:
            self._by_id.pop(topic.topic_id, None)
            self._changed()
        return topic

    def topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID | None) -> TopicInfo | None:
        return None if topic_id is None else self._by_id.get(topic_id)

    def topics(self) -> list[TopicInfo]:
        return list(self._topics.values())

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        info = self._topics.get(topic)
        return None if info is None else info.partitions.get(partition)
