"""What the active controller knows about the cluster, as Kafka's ``ControllerContext``.

Loaded from ZooKeeper when a broker becomes controller and then kept in step by the event
handlers, which alone mutate it (one event at a time), so every decision is taken against one
consistent picture. Partition states carry the znode version they were read or written at: the
next write names it, and a mismatch means someone else (a leader shrinking its ISR) wrote in
between.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from reference_broker.log.topic_partition import TopicPartition
from reference_broker.zk.broker_znodes import BrokerInfo
from reference_broker.zk.topic_znodes import LeaderIsrAndControllerEpoch, ReplicaAssignment


@dataclass
class ControllerContext:
    """One controller epoch's view; a fresh one is loaded on every failover."""

    epoch: int = -1
    epoch_zk_version: int = -1
    live_brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    broker_epochs: dict[int, int] = field(default_factory=dict)
    shutting_down_brokers: set[int] = field(default_factory=set)
    assignments: dict[TopicPartition, ReplicaAssignment] = field(default_factory=dict)
    topic_ids: dict[str, str | None] = field(default_factory=dict)
    partition_states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = field(
        default_factory=dict)
    partition_zk_versions: dict[TopicPartition, int] = field(default_factory=dict)
    topics_to_delete: set[str] = field(default_factory=set)
    # Partition → target replicas of a reassignment still waiting for its new replicas.
    reassignments: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)

    # --- brokers ------------------------------------------------------------------------------

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self.live_brokers)

    @property
    def live_broker_ids(self) -> set[int]:
        """Brokers that may lead: registered and not in a controlled shutdown."""
        return set(self.live_brokers) - self.shutting_down_brokers

    def add_broker(self, info: BrokerInfo, broker_epoch: int) -> None:
        self.live_brokers[info.broker_id] = info
        self.broker_epochs[info.broker_id] = broker_epoch

    def remove_broker(self, broker_id: int) -> None:
        self.live_brokers.pop(broker_id, None)
        self.broker_epochs.pop(broker_id, None)
        self.shutting_down_brokers.discard(broker_id)

    def is_replica_online(self, replica: int, *, include_shutting_down: bool = False) -> bool:
        if include_shutting_down:
            return replica in self.live_brokers
        return replica in self.live_brokers and replica not in self.shutting_down_brokers

    # --- topics and partitions ------------------------------------------------------------------

    @property
    def all_topics(self) -> set[str]:
        return {tp.topic for tp in self.assignments} | set(self.topic_ids)

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        return sorted(tp for tp in self.assignments if tp.topic == topic)

    def all_partitions(self) -> list[TopicPartition]:
        return sorted(self.assignments)

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        assignment = self.assignments.get(tp)
        return assignment.replicas if assignment is not None else ()

    def live_replicas(self, tp: TopicPartition) -> list[int]:
        return [r for r in self.replicas(tp) if self.is_replica_online(r)]

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return sorted(tp for tp, a in self.assignments.items() if broker_id in a.replicas)

    def partitions_led_by(self, broker_id: int) -> list[TopicPartition]:
        return sorted(tp for tp, s in self.partition_states.items() if s.leader == broker_id)

    def offline_partitions(self) -> list[TopicPartition]:
        """Partitions with a state whose leader is not a live (non-shutting-down) broker."""
        return sorted(
            tp for tp, state in self.partition_states.items()
            if tp.topic not in self.topics_to_delete
            and not self.is_replica_online(state.leader)
        )

    def set_topic(self, topic: str, topic_id: str | None,
                  assignment: dict[int, ReplicaAssignment]) -> None:
        self.topic_ids[topic] = topic_id
        for partition, replicas in assignment.items():
            self.assignments[TopicPartition(topic, partition)] = replicas

    def remove_topic(self, topic: str) -> None:
        self.topic_ids.pop(topic, None)
        self.topics_to_delete.discard(topic)
        for tp in self.partitions_of(topic):
            self.assignments.pop(tp, None)
            self.partition_states.pop(tp, None)
            self.partition_zk_versions.pop(tp, None)
            self.reassignments.pop(tp, None)

    def put_state(self, tp: TopicPartition, state: LeaderIsrAndControllerEpoch,
                  zk_version: int) -> None:
        self.partition_states[tp] = state
        self.partition_zk_versions[tp] = zk_version

    def states_of(self, partitions: Iterable[TopicPartition]
                  ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        return {tp: self.partition_states[tp] for tp in partitions if tp in self.partition_states}
