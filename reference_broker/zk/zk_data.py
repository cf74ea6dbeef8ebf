"""Kafka's ZooKeeper-mode znodes: one small object per znode with ``path``/``encode``/``decode``.

The layout and JSON are Kafka's own (the last ZooKeeper-mode releases, 3.5–3.9), so tools
written for a Kafka cluster — ``zookeeper-shell``, Kafka's admin scripts, monitoring that reads
``/brokers/ids`` — see a reference-broker cluster exactly as they would see Kafka. Versions
written: broker registration 5, topic assignment 3, controller 2, config change notification 2,
everything else 1. Decoders accept the older versions Kafka itself still reads.

Pure: bytes in, values out. Timestamps and random ids are arguments, never read here, so a
test can pin every byte. Malformed data raises :class:`ZkDataError` naming the znode and field.
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
    str_field,
)

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


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


# --- controller --------------------------------------------------------------------------------


class ControllerZNode:
    """``/controller``: ephemeral; whoever creates it is the controller."""

    VERSION = 2

    @staticmethod
    def path() -> str:
        return "/controller"

    @staticmethod
    def encode(broker_id: int, timestamp_ms: int, kraft_controller_epoch: int = -1) -> bytes:
        """``kraftControllerEpoch`` -1 says this cluster was never migrated to KRaft."""
        return encode_json({
            "version": ControllerZNode.VERSION,
            "brokerid": broker_id,
            "timestamp": str(timestamp_ms),
            "kraftControllerEpoch": kraft_controller_epoch,
        })

    @staticmethod
    def decode(data: bytes) -> int:
        """The controller's broker id (version 1 lacks ``kraftControllerEpoch``; it is ignored)."""
        return int_field(decode_json_object(data, "/controller"), "brokerid", "/controller")


class ControllerEpochZNode:
    """``/controller_epoch``: the number of controller elections so far, as plain text."""

    @staticmethod
    def path() -> str:
        return "/controller_epoch"

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(epoch).encode("ascii")

    @staticmethod
    def decode(data: bytes) -> int:
        text = data.decode("ascii", errors="replace").strip()
        if not text.lstrip("-").isdigit():
            raise ZkDataError(f"/controller_epoch: expected an integer, got {data[:50]!r}")
        return int(text)


# --- cluster id --------------------------------------------------------------------------------


class ClusterIdZNode:
    """``/cluster/id``: written once by the first broker; ``version`` is the *string* "1"."""

    @staticmethod
    def path() -> str:
        return "/cluster/id"

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return encode_json({"version": "1", "id": cluster_id})

    @staticmethod
    def decode(data: bytes) -> str:
        return str_field(decode_json_object(data, "/cluster/id"), "id", "/cluster/id")


# --- brokers -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class EndPoint:
    """One advertised listener: ``NAME://host:port`` plus the security protocol it speaks."""

    listener_name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"

    @classmethod
    def parse(cls, text: str, protocol_map: Mapping[str, str], where: str) -> EndPoint:
        """Parse ``NAME://host:port``; IPv6 hosts are bracketed, an empty host is allowed."""
        name, sep, address = text.partition("://")
        host, colon, port = address.rpartition(":")
        if not sep or not name or not colon or not port.isdigit():
            raise ZkDataError(f"{where}: endpoint {text!r} is not NAME://host:port")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        protocol = protocol_map.get(name, name)
        if protocol not in SECURITY_PROTOCOLS:
            raise ZkDataError(
                f"{where}: listener {name!r} has no security protocol (one of "
                f"{', '.join(SECURITY_PROTOCOLS)}) in listener_security_protocol_map"
            )
        return cls(name, host, int(port), protocol)


@dataclass(frozen=True)
class BrokerInfo:
    """What a broker registers: its id, listeners, rack, and when it registered.

    ``version`` is the schema version a decoded registration was written with; encoding always
    writes the current one.
    """

    broker_id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    jmx_port: int = -1
    timestamp_ms: int = 0
    version: int = 5


class BrokerIdsZNode:
    """``/brokers/ids``: persistent parent of the brokers' ephemeral registrations."""

    @staticmethod
    def path() -> str:
        return "/brokers/ids"


class BrokerIdZNode:
    """``/brokers/ids/[id]``: ephemeral; a broker is alive exactly while this exists.

    The top-level ``host``/``port`` repeat the first PLAINTEXT endpoint for old clients, or
    are ``null``/-1 when there is none, as Kafka writes them.
    """

    VERSION = 5

    @staticmethod
    def path(broker_id: int) -> str:
        return f"{BrokerIdsZNode.path()}/{broker_id}"

    @staticmethod
    def encode(info: BrokerInfo) -> bytes:
        plaintext = next(
            (ep for ep in info.endpoints if ep.security_protocol == "PLAINTEXT"), None
        )
        document: dict[str, Any] = {
            "features": {},
            "listener_security_protocol_map": {
                ep.listener_name: ep.security_protocol for ep in info.endpoints
            },
            "endpoints": [ep.connection_string for ep in info.endpoints],
            "jmx_port": info.jmx_port,
            "port": plaintext.port if plaintext else -1,
            "host": plaintext.host if plaintext else None,
            "version": BrokerIdZNode.VERSION,
            "timestamp": str(info.timestamp_ms),
        }
        if info.rack is not None:
            document["rack"] = info.rack
        return encode_json(document)

    @staticmethod
    def decode(broker_id: int, data: bytes) -> BrokerInfo:
        where = BrokerIdZNode.path(broker_id)
        obj = decode_json_object(data, where)
        version = int_field(obj, "version", where)
        if version < 1:
            raise ZkDataError(f"{where}: unsupported registration version {version}")
        if version == 1:
            endpoints: tuple[EndPoint, ...] = (
                EndPoint("PLAINTEXT", str_field(obj, "host", where), int_field(obj, "port", where)),
            )
        else:
            protocol_map = object_field(obj, "listener_security_protocol_map", where)
            raw_endpoints = obj.get("endpoints")
            if not isinstance(raw_endpoints, list) or not all(
                isinstance(item, str) for item in raw_endpoints
            ):
                raise ZkDataError(f"{where}: 'endpoints' must be a list of strings")
            endpoints = tuple(EndPoint.parse(text, protocol_map, where) for text in raw_endpoints)
        rack = obj.get("rack")
        if rack is not None and not isinstance(rack, str):
            raise ZkDataError(f"{where}: field 'rack' must be a string, got {rack!r}")
        timestamp = obj.get("timestamp", "0")
        if not isinstance(timestamp, str) or not timestamp.isdigit():
            raise ZkDataError(f"{where}: 'timestamp' must be a string of digits, got {timestamp!r}")
        return BrokerInfo(
            broker_id=broker_id,
            endpoints=endpoints,
            rack=rack,
            jmx_port=int_field(obj, "jmx_port", where),
            timestamp_ms=int(timestamp),
            version=version,
        )


# --- topics and partitions ---------------------------------------------------------------------


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


# The parents every broker makes sure exist at start-up, before it writes anything under them.
PERSISTENT_PATHS: tuple[str, ...] = (
    BrokerIdsZNode.path(),
    TopicsZNode.path(),
    ConfigEntityChangeNotificationSequenceZNode.parent_path(),
    f"/config/{ConfigEntityZNode.TOPICS}",
    f"/config/{ConfigEntityZNode.BROKERS}",
    DeleteTopicsZNode.path(),
    IsrChangeNotificationZNode.path(),
)


# --- producer ids ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProducerIdBlock:
    """A range of producer ids one broker hands out: ``block_start``..``block_end`` inclusive."""

    broker_id: int
    block_start: int
    block_end: int


class ProducerIdBlockZNode:
    """``/latest_producer_id_block``: the last block any broker claimed; claims are
    version-checked so no two brokers get the same ids (Kafka's ZooKeeper-mode allocator)."""

    VERSION = 1

    @staticmethod
    def path() -> str:
        return "/latest_producer_id_block"

    @staticmethod
    def encode(block: ProducerIdBlock) -> bytes:
        return encode_json({"version": ProducerIdBlockZNode.VERSION, "broker": block.broker_id,
                            "block_start": str(block.block_start),
                            "block_end": str(block.block_end)})

    @staticmethod
    def decode(data: bytes) -> ProducerIdBlock:
        where = ProducerIdBlockZNode.path()
        obj = decode_json_object(data, where)
        try:
            start, end = int(obj["block_start"]), int(obj["block_end"])
        except (KeyError, TypeError, ValueError):
            raise ZkDataError(f"{where}: 'block_start'/'block_end' must be numbers as text, "
                              f"got {obj!r}") from None
        return ProducerIdBlock(int_field(obj, "broker", where), start, end)
