"""The services a request handler may use, handed over as one object at start-up."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reference_broker.config import KafkaConfig
from reference_broker.coordinator.group.group_coordinator import GroupCoordinator
from reference_broker.coordinator.group.offset_commits import OffsetCommits
from reference_broker.coordinator.transaction.transaction_coordinator import (
    TransactionCoordinator,
)
from reference_broker.server.admin_manager import AdminManager
from reference_broker.server.metadata_cache import MetadataCache
from reference_broker.server.offsets_topic import OffsetsTopic
from reference_broker.server.replica_manager import ReplicaManager
from reference_broker.server.request_order import ConnectionOrder
from reference_broker.server.transaction_state_topic import TransactionStateTopic
from reference_broker.server.transaction_verification import TransactionVerifier


@dataclass
class BrokerServices:
    config: KafkaConfig
    metadata_cache: MetadataCache
    replica_manager: ReplicaManager
    admin_manager: AdminManager
    offsets_topic: OffsetsTopic
    group_coordinator: GroupCoordinator
    offset_commits: OffsetCommits
    transaction_topic: TransactionStateTopic
    transaction_coordinator: TransactionCoordinator
    transaction_verifier: TransactionVerifier
    group_request_order: ConnectionOrder = field(default_factory=ConnectionOrder)
    produce_append_order: ConnectionOrder = field(default_factory=ConnectionOrder)
    # ZooKeeper mode only: the broker's ZK half (server.zk_broker.ZkBroker) and the controller
    # (controller.kafka_controller.KafkaController), active or not.
    zk_broker: Any = None
    controller: Any = None

    @property
    def broker_id(self) -> int:
        return self.config.broker_id
