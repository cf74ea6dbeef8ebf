"""Kafka's ZooKeeper-mode znodes of the cluster itself: its brokers and its controller.

``/controller``, ``/controller_epoch``, ``/cluster/id``, ``/brokers/ids/[id]`` (with the
``EndPoint``/``BrokerInfo`` a broker registers) and ``/latest_producer_id_block``: the znodes
that say which brokers are alive, which of them controls the cluster, and what they share.
Kafka keeps every znode in one file, ``ZkData.scala``; here its znodes come in three modules by
the part of the tree they describe — this one, :mod:`reference_broker.zk.topic_znodes` (topics
and partitions) and :mod:`reference_broker.zk.admin_znodes` (configs, admin requests and
change notifications) — so that each stays small and a reader finds a znode by what it is for.

The layout and JSON are Kafka's own (the last ZooKeeper-mode releases, 3.5–3.9), so tools
written for a Kafka cluster — ``zookeeper-shell``, Kafka's admin scripts, monitoring that reads
``/brokers/ids`` — see a reference-broker cluster exactly as they would see Kafka. Versions
written: broker registration 5, controller 2, everything else here 1. Decoders accept the
older versions Kafka itself still reads.

Pure: bytes in, values out. Timestamps are arguments, never read here, so a test can pin every
byte. Malformed data raises :class:`~reference_broker.zk.zk_json.ZkDataError` naming the znode
and field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reference_broker.zk.zk_json import (
    ZkDataError,
    decode_json_object,
    encode_json,
    int_field,
    object_field,
    str_field,
)

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


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
