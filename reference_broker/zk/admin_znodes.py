"""Kafka's ZooKeeper-mode znodes through which the cluster is asked to act.

Config overrides (``/config/[type]/[name]``) and the notices announcing their changes
(``/config/changes``), the admin requests the controller carries out (``/admin/delete_topics``,
``/admin/reassign_partitions``, ``/admin/preferred_replica_election``) and the leaders' ISR
change notices (``/isr_change_notification``): small documents written by a tool, a broker or a
leader, and watched by the controller or by every broker. One of three groups of znodes (see
:mod:`reference_broker.zk.broker_znodes` for why the three are apart).

The layout and JSON are Kafka's own (3.5–3.9). Versions written: config change notification
2, everything else 1. Decoders accept the older versions Kafka itself still reads.

Pure: bytes in, values out. Malformed data raises
:class:`~reference_broker.zk.zk_json.ZkDataError` naming the znode and field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from reference_broker.log.topic_partition import TopicPartition
from reference_broker.zk.zk_json import (
    ZkDataError,
    decode_json_object,
    encode_json,
    int_field,
    int_list,
    object_field,
    str_field,
)


def _partitions_to_json(partitions: Iterable[TopicPartition]) -> list[dict[str, Any]]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(set(partitions))]


def _topic_partition(entry: Mapping[str, Any], where: str) -> TopicPartition:
    return TopicPartition(str_field(entry, "topic", where), int_field(entry, "partition", where))


def _partitions_from_json(obj: Mapping[str, Any], where: str) -> frozenset[TopicPartition]:
    entries = obj.get("partitions")
    if not isinstance(entries, list):
        raise ZkDataError(f"{where}: field 'partitions' must be a list, got {entries!r}")
    result = set()
    for entry in entries:
        if not isinstance(entry, dict):
            raise ZkDataError(f"{where}: partition entry must be an object, got {entry!r}")
        result.add(_topic_partition(entry, where))
    return frozenset(result)


# --- configuration -----------------------------------------------------------------------------


class ConfigEntityZNode:
    """``/config/[entity type]/[name]``, e.g. ``/config/topics/[topic]``: overrides only."""

    TOPICS = "topics"
    BROKERS = "brokers"

    @staticmethod
    def path(entity_type: str, name: str) -> str:
        return f"/config/{entity_type}/{name}"

    @staticmethod
    def encode(config: Mapping[str, str]) -> bytes:
        return encode_json({"version": 1, "config": dict(config)})

    @staticmethod
    def decode(data: bytes) -> dict[str, str]:
        """Values come back as strings, as Kafka stores them; an empty znode is no overrides."""
        if not data:
            return {}
        config = object_field(decode_json_object(data, "/config"), "config", "/config")
        if not all(isinstance(value, str) for value in config.values()):
            raise ZkDataError(f"/config: every config value must be a string, got {config!r}")
        return config


class ConfigEntityChangeNotificationSequenceZNode:
    """``/config/changes/config_change_[seq]``: tells every broker an entity's config changed.

    Runtime changes such as ``unclean.leader.election.enable`` on a topic reach the brokers
    this way: the writer updates ``/config/topics/[t]`` and then adds one of these.
    """

    PREFIX = "config_change_"

    @staticmethod
    def parent_path() -> str:
        return "/config/changes"

    @staticmethod
    def path(sequence_number: str = "") -> str:
        znode = ConfigEntityChangeNotificationSequenceZNode
        return f"{znode.parent_path()}/{znode.PREFIX}{sequence_number}"

    @staticmethod
    def encode(entity_type: str, name: str) -> bytes:
        return encode_json({"version": 2, "entity_path": f"{entity_type}/{name}"})

    @staticmethod
    def decode(data: bytes) -> tuple[str, str]:
        where = "/config/changes"
        entity_path = str_field(decode_json_object(data, where), "entity_path", where)
        entity_type, sep, name = entity_path.partition("/")
        if not sep:
            raise ZkDataError(f"{where}: 'entity_path' must be <type>/<name>")
        return entity_type, name


# --- admin requests ----------------------------------------------------------------------------


class DeleteTopicsZNode:
    """``/admin/delete_topics``: a child per topic awaiting deletion by the controller."""

    @staticmethod
    def path() -> str:
        return "/admin/delete_topics"


class DeleteTopicsTopicZNode:
    """``/admin/delete_topics/[topic]``: its presence is the request; Kafka writes no data."""

    @staticmethod
    def path(topic: str) -> str:
        return f"{DeleteTopicsZNode.path()}/{topic}"


class ReassignPartitionsZNode:
    """``/admin/reassign_partitions``: the legacy (pre-KIP-455) reassignment request."""

    @staticmethod
    def path() -> str:
        return "/admin/reassign_partitions"

    @staticmethod
    def encode(reassignment: Mapping[TopicPartition, Iterable[int]]) -> bytes:
        return encode_json({
            "version": 1,
            "partitions": [
                {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
                for tp, replicas in sorted(reassignment.items())
            ],
        })

    @staticmethod
    def decode(data: bytes) -> dict[TopicPartition, tuple[int, ...]]:
        where = ReassignPartitionsZNode.path()
        entries = decode_json_object(data, where).get("partitions")
        if not isinstance(entries, list):
            raise ZkDataError(f"{where}: field 'partitions' must be a list")
        result = {}
        for entry in entries:
            if not isinstance(entry, dict):
                raise ZkDataError(f"{where}: partition entry must be an object, got {entry!r}")
            replicas = int_list(entry.get("replicas"), "'replicas'", where)
            result[_topic_partition(entry, where)] = replicas
        return result


class PreferredReplicaElectionZNode:
    """``/admin/preferred_replica_election``: partitions whose first replica should lead."""

    @staticmethod
    def path() -> str:
        return "/admin/preferred_replica_election"

    @staticmethod
    def encode(partitions: Iterable[TopicPartition]) -> bytes:
        return encode_json({"version": 1, "partitions": _partitions_to_json(partitions)})

    @staticmethod
    def decode(data: bytes) -> frozenset[TopicPartition]:
        where = PreferredReplicaElectionZNode.path()
        return _partitions_from_json(decode_json_object(data, where), where)


# --- ISR change notifications ------------------------------------------------------------------


class IsrChangeNotificationZNode:
    """``/isr_change_notification``: parent of the leaders' sequential ISR-change notices."""

    @staticmethod
    def path() -> str:
        return "/isr_change_notification"


class IsrChangeNotificationSequenceZNode:
    """``/isr_change_notification/isr_change_[seq]``: partitions whose ISR a leader changed."""

    PREFIX = "isr_change_"

    @staticmethod
    def path(sequence_number: str = "") -> str:
        """With no sequence number: the prefix to create a sequential znode under."""
        prefix = IsrChangeNotificationSequenceZNode.PREFIX
        return f"{IsrChangeNotificationZNode.path()}/{prefix}{sequence_number}"

    @staticmethod
    def encode(partitions: Iterable[TopicPartition]) -> bytes:
        return encode_json({"version": 1, "partitions": _partitions_to_json(partitions)})

    @staticmethod
    def decode(data: bytes) -> frozenset[TopicPartition]:
        where = IsrChangeNotificationZNode.path()
        return _partitions_from_json(decode_json_object(data, where), where)

    @staticmethod
    def sequence_number(name: str) -> str:
        """The ``0000000007`` of a child name or path ending in ``isr_change_0000000007``."""
        prefix = IsrChangeNotificationSequenceZNode.PREFIX
        return name[name.rindex(prefix) + len(prefix):]
