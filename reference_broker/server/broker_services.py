"""The services a request handler may use, handed over as one object at start-up."""

from __future__ import annotations

from dataclasses import dataclass

from reference_broker.config import KafkaConfig
from reference_broker.server.admin_manager import AdminManager
from reference_broker.server.metadata_cache import MetadataCache
from reference_broker.server.replica_manager import ReplicaManager


@dataclass
class BrokerServices:
    config: KafkaConfig
    metadata_cache: MetadataCache
    replica_manager: ReplicaManager
    admin_manager: AdminManager

    @property
    def broker_id(self) -> int:
        return self.config.broker_id
