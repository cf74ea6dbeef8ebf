"""Kafka's ZooKeeper-mode znodes of topics and partitions: assignments and partition states.

``/brokers/topics/[topic]`` (the replica assignment, and reassignments in flight) and
``/brokers/topics/[topic]/partitions/[partition]/state`` (leader, leader epoch, ISR), with the
values they decode to. They are the state the controller decides and every broker acts on, and
the znodes written most often; one of Kafka's three groups of znodes (see
:mod:`reference_broker.zk.broker_znodes` for why the three are apart).

The layout and JSON are Kafka's own (3.5–3.9). Versions written: topic assignment 3, partition
state 1. Decoders accept the older versions Kafka itself still reads.

Pure: bytes in, values out; topic ids are arguments, never generated here. Malformed data
raises :class:`~reference_broker.zk.zk_json.ZkDataError` naming the znode and field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reference_broker.log.topic_partition import TopicPartition
from reference_broker.zk.zk_json import (
    ZkDataError,
    decode_json_object,
    encode_json,
    int_field,
    int_list,
    is_base64_uuid,
    object_field,
)


@dataclass(frozen=True)
class ReplicaAssignment:
    """A partition's replicas in preference order, and those a reassignment adds or removes."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicAssignment:
    """Partition number → replica assignment, and the topic id (22-char base64) if any."""

    partitions: Mapping[int, ReplicaAssignment]
    topic_id: str | None = None

    @classmethod
    def of(
        cls, replicas: Mapping[int, Iterable[int]], topic_id: str | None = None
    ) -> TopicAssignment:
        """From a plain ``{partition: [broker, ...]}`` map, with no reassignment in flight."""
        return cls(
            {p: ReplicaAssignment(tuple(brokers)) for p, brokers in replicas.items()}, topic_id
        )

    def replicas(self) -> dict[int, list[int]]:
        return {p: list(a.replicas) for p, a in sorted(self.partitions.items())}


class TopicsZNode:
    """``/brokers/topics``: one child per topic."""

    @staticmethod
    def path() -> str:
        return "/brokers/topics"


class TopicZNode:
    """``/brokers/topics/[topic]``: the replica assignment, keyed by partition number as text."""

    VERSION = 3

    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicsZNode.path()}/{topic}"

    @staticmethod
    def encode(assignment: TopicAssignment) -> bytes:
        ordered = sorted(assignment.partitions.items())
        document: dict[str, Any] = {
            "removing_replicas": {
                str(p): list(a.removing_replicas) for p, a in ordered if a.removing_replicas
            },
            "partitions": {str(p): list(a.replicas) for p, a in ordered},
            "adding_replicas": {
                str(p): list(a.adding_replicas) for p, a in ordered if a.adding_replicas
            },
            "version": TopicZNode.VERSION,
        }
        if assignment.topic_id is not None:
            document["topic_id"] = assignment.topic_id
        return encode_json(document)

    @staticmethod
    def decode(topic: str, data: bytes) -> TopicAssignment:
        where = TopicZNode.path(topic)
        obj = decode_json_object(data, where)
        adding = object_field(obj, "adding_replicas", where)
        removing = object_field(obj, "removing_replicas", where)
        partitions: dict[int, ReplicaAssignment] = {}
        for key, replicas in object_field(obj, "partitions", where).items():
            if not key.isdigit():
                raise ZkDataError(f"{where}: partition key {key!r} is not a number")
            partitions[int(key)] = ReplicaAssignment(
                int_list(replicas, f"replicas of partition {key}", where),
                int_list(adding.get(key, []), f"adding_replicas of {key}", where),
                int_list(removing.get(key, []), f"removing_replicas of {key}", where),
            )
        topic_id = obj.get("topic_id")
        if topic_id is not None and not (isinstance(topic_id, str) and is_base64_uuid(topic_id)):
            raise ZkDataError(f"{where}: 'topic_id' must be a 22-character base64 Uuid")
        return TopicAssignment(partitions, topic_id)


class TopicPartitionsZNode:
    """``/brokers/topics/[topic]/partitions``."""

    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicZNode.path(topic)}/partitions"


class TopicPartitionZNode:
    """``/brokers/topics/[topic]/partitions/[partition]``."""

    @staticmethod
    def path(tp: TopicPartition) -> str:
        return f"{TopicPartitionsZNode.path(tp.topic)}/{tp.partition}"


@dataclass(frozen=True)
class LeaderIsrAndControllerEpoch:
    """A partition's leader, leader epoch and ISR, and the controller epoch that wrote them.

    ``leader_recovery_state`` is 0 (recovered) except after an unclean election (KIP-704: 1,
    recovering); Kafka writes the field only when it is not 0.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = 0


class TopicPartitionStateZNode:
    """``/brokers/topics/[topic]/partitions/[partition]/state``; writes are version-checked."""

    VERSION = 1

    @staticmethod
    def path(tp: TopicPartition) -> str:
        return f"{TopicPartitionZNode.path(tp)}/state"

    @staticmethod
    def encode(state: LeaderIsrAndControllerEpoch) -> bytes:
        document: dict[str, Any] = {
            "controller_epoch": state.controller_epoch,
            "leader": state.leader,
            "version": TopicPartitionStateZNode.VERSION,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
        }
        if state.leader_recovery_state:
            document["leader_recovery_state"] = state.leader_recovery_state
        return encode_json(document)

    @staticmethod
    def decode(tp: TopicPartition, data: bytes) -> LeaderIsrAndControllerEpoch:
        where = TopicPartitionStateZNode.path(tp)
        obj = decode_json_object(data, where)
        recovery = obj.get("leader_recovery_state", 0)
        if recovery not in (0, 1) or isinstance(recovery, bool):
            raise ZkDataError(f"{where}: 'leader_recovery_state' must be 0 or 1, got {recovery!r}")
        return LeaderIsrAndControllerEpoch(
            leader=int_field(obj, "leader", where),
            leader_epoch=int_field(obj, "leader_epoch", where),
            isr=int_list(obj.get("isr"), "'isr'", where),
            controller_epoch=int_field(obj, "controller_epoch", where),
            leader_recovery_state=recovery,
        )
