"""Wire types of the ZooKeeper-era controller → broker APIs, which kio (built from Kafka 4) lacks.

Kafka 4 removed ZooKeeper mode and with it LeaderAndIsr (4), StopReplica (5), UpdateMetadata (6)
and ControlledShutdown (7), so kio generates nothing for them. The classes here have the shape
kio generates (frozen, slotted, keyword-only dataclasses carrying `__type__`, `__version__`,
`__flexible__`, `__api_key__`, `__header_schema__`, each field tagged with its `kafka_type`), so
kio's generic `entity_reader`/`entity_writer` and `harness.wire.protocol.build` work on them.

They follow Kafka 3.x's message schemas, one version per API: the first flexible version that
still carries every field a ZooKeeper-mode controller of that era sends (no topic ids, no KRaft
migration flags). Field names are the schemas' names in snake_case, as kio spells them.

This module deliberately has no `from __future__ import annotations`: kio classifies fields by
their runtime annotation objects, not by strings.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.schema.types import BrokerId, TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64

LEADER_AND_ISR = 4
STOP_REPLICA = 5
UPDATE_METADATA = 6
CONTROLLED_SHUTDOWN = 7

API_NAMES = {
    LEADER_AND_ISR: "leader_and_isr",
    STOP_REPLICA: "stop_replica",
    UPDATE_METADATA: "update_metadata",
    CONTROLLED_SHUTDOWN: "controlled_shutdown",
}


def _entity(api_key: int, version: int, kind: EntityType = EntityType.nested, *,
            response: bool = False) -> Callable[[type], type]:
    """Make `cls` a kio-shaped entity of one API version (all versions here are flexible).

    Nested structs carry the same markers as their message, with the message's header schema,
    as kio's generated classes do. Setting them in one place keeps the field lists readable.
    """
    header = ResponseHeader if response or kind is EntityType.response else RequestHeader

    def decorate(cls: type) -> type:
        made: Any = dataclass(frozen=True, slots=True, kw_only=True)(cls)
        made.__type__ = kind
        made.__version__ = i16(version)
        made.__flexible__ = True
        made.__api_key__ = i16(api_key)
        made.__header_schema__ = header
        return made

    return decorate


def _i32(default: int | None = None) -> Any:
    if default is None:
        return field(metadata={"kafka_type": "int32"})
    return field(metadata={"kafka_type": "int32"}, default=i32(default))


def _i32_array() -> Any:
    return field(metadata={"kafka_type": "int32"}, default=())


def _string() -> Any:
    return field(metadata={"kafka_type": "string"})


def _error_code() -> Any:
    return field(metadata={"kafka_type": "error_code"})


def _broker_epoch() -> Any:
    # Absent (-1) means "the sender does not know": receivers then skip the staleness check.
    return field(metadata={"kafka_type": "int64"}, default=i64(-1))


# --- LeaderAndIsr v4 ---------------------------------------------------------------------------

@_entity(LEADER_AND_ISR, 4)
class LeaderAndIsrPartitionState:
    partition_index: i32 = _i32()
    controller_epoch: i32 = _i32()
    """Epoch of the controller that last wrote this partition's state to ZooKeeper."""
    leader: BrokerId = _i32()
    leader_epoch: i32 = _i32()
    isr: tuple[BrokerId, ...] = _i32_array()
    zk_version: i32 = _i32()
    """Version of the partition state znode; the leader's ISR updates are conditional on it."""
    replicas: tuple[BrokerId, ...] = _i32_array()
    adding_replicas: tuple[BrokerId, ...] = _i32_array()
    """Replicas joining through a reassignment in progress."""
    removing_replicas: tuple[BrokerId, ...] = _i32_array()
    """Replicas leaving through a reassignment in progress."""
    is_new: bool = field(metadata={"kafka_type": "bool"}, default=False)
    """True when the replica is being created: a missing log is then expected, not an error."""


@_entity(LEADER_AND_ISR, 4)
class LeaderAndIsrTopicState:
    topic_name: TopicName = _string()
    partition_states: tuple[LeaderAndIsrPartitionState, ...]


@_entity(LEADER_AND_ISR, 4)
class LeaderAndIsrLiveLeader:
    broker_id: BrokerId = _i32()
    host_name: str = _string()
    port: i32 = _i32()


@_entity(LEADER_AND_ISR, 4, EntityType.request)
class LeaderAndIsrRequest:
    controller_id: BrokerId = _i32()
    controller_epoch: i32 = _i32()
    broker_epoch: i64 = _broker_epoch()
    """The receiving broker's epoch as the controller knows it, to fence stale requests."""
    topic_states: tuple[LeaderAndIsrTopicState, ...]
    live_leaders: tuple[LeaderAndIsrLiveLeader, ...]


@_entity(LEADER_AND_ISR, 4, response=True)
class LeaderAndIsrPartitionError:
    topic_name: TopicName = _string()
    partition_index: i32 = _i32()
    error_code: ErrorCode = _error_code()


@_entity(LEADER_AND_ISR, 4, EntityType.response)
class LeaderAndIsrResponse:
    error_code: ErrorCode = _error_code()
    partition_errors: tuple[LeaderAndIsrPartitionError, ...]


# --- UpdateMetadata v6 -------------------------------------------------------------------------

@_entity(UPDATE_METADATA, 6)
class UpdateMetadataPartitionState:
    partition_index: i32 = _i32()
    controller_epoch: i32 = _i32()
    leader: BrokerId = _i32()
    leader_epoch: i32 = _i32()
    isr: tuple[BrokerId, ...] = _i32_array()
    zk_version: i32 = _i32()
    replicas: tuple[BrokerId, ...] = _i32_array()
    offline_replicas: tuple[BrokerId, ...] = _i32_array()
    """Replicas on brokers that are alive but whose log directory for this partition failed."""


@_entity(UPDATE_METADATA, 6)
class UpdateMetadataTopicState:
    topic_name: TopicName = _string()
    partition_states: tuple[UpdateMetadataPartitionState, ...]


@_entity(UPDATE_METADATA, 6)
class UpdateMetadataEndpoint:
    port: i32 = _i32()
    host: str = _string()
    listener: str = _string()
    security_protocol: i16 = field(metadata={"kafka_type": "int16"})
    """Kafka's SecurityProtocol id: 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL."""


@_entity(UPDATE_METADATA, 6)
class UpdateMetadataBroker:
    id: BrokerId = _i32()
    endpoints: tuple[UpdateMetadataEndpoint, ...]
    rack: str | None = field(metadata={"kafka_type": "string"})


@_entity(UPDATE_METADATA, 6, EntityType.request)
class UpdateMetadataRequest:
    controller_id: BrokerId = _i32()
    controller_epoch: i32 = _i32()
    broker_epoch: i64 = _broker_epoch()
    topic_states: tuple[UpdateMetadataTopicState, ...]
    live_brokers: tuple[UpdateMetadataBroker, ...]


@_entity(UPDATE_METADATA, 6, EntityType.response)
class UpdateMetadataResponse:
    error_code: ErrorCode = _error_code()


# --- StopReplica v3 ----------------------------------------------------------------------------

@_entity(STOP_REPLICA, 3)
class StopReplicaPartitionState:
    partition_index: i32 = _i32()
    leader_epoch: i32 = _i32(-1)
    """-1 skips the epoch check; -2 (a deletion) is accepted whatever the current epoch."""
    delete_partition: bool = field(metadata={"kafka_type": "bool"})


@_entity(STOP_REPLICA, 3)
class StopReplicaTopicState:
    topic_name: TopicName = _string()
    partition_states: tuple[StopReplicaPartitionState, ...]


@_entity(STOP_REPLICA, 3, EntityType.request)
class StopReplicaRequest:
    controller_id: BrokerId = _i32()
    controller_epoch: i32 = _i32()
    broker_epoch: i64 = _broker_epoch()
    topic_states: tuple[StopReplicaTopicState, ...]


@_entity(STOP_REPLICA, 3, response=True)
class StopReplicaPartitionError:
    topic_name: TopicName = _string()
    partition_index: i32 = _i32()
    error_code: ErrorCode = _error_code()


@_entity(STOP_REPLICA, 3, EntityType.response)
class StopReplicaResponse:
    error_code: ErrorCode = _error_code()
    partition_errors: tuple[StopReplicaPartitionError, ...]


# --- ControlledShutdown v3 ---------------------------------------------------------------------


@_entity(CONTROLLED_SHUTDOWN, 3, EntityType.request)
class ControlledShutdownRequest:
    broker_id: BrokerId = _i32()
    broker_epoch: i64 = _broker_epoch()


@_entity(CONTROLLED_SHUTDOWN, 3, response=True)
class RemainingPartition:
    topic_name: TopicName = _string()
    partition_index: i32 = _i32()


@_entity(CONTROLLED_SHUTDOWN, 3, EntityType.response)
class ControlledShutdownResponse:
    error_code: ErrorCode = _error_code()
    remaining_partitions: tuple[RemainingPartition, ...]
    """Partitions the broker still leads; empty once it may shut down."""


# (api_key, version) → (request class, response class)
ENTITIES: dict[tuple[int, int], tuple[type, type]] = {
    (LEADER_AND_ISR, 4): (LeaderAndIsrRequest, LeaderAndIsrResponse),
    (STOP_REPLICA, 3): (StopReplicaRequest, StopReplicaResponse),
    (UPDATE_METADATA, 6): (UpdateMetadataRequest, UpdateMetadataResponse),
    (CONTROLLED_SHUTDOWN, 3): (ControlledShutdownRequest, ControlledShutdownResponse),
}
