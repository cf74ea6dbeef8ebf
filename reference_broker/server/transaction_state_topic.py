"""`__transaction_state` as the transaction coordinator sees it: an internal topic
(`server/internal_topic.py`) shaped by the transaction.state.log.* settings. As in Kafka, its
appends always wait for the whole ISR (required acks -1, within request.timeout.ms) and the
topic carries min.insync.replicas = transaction.state.log.min.isr, so a transaction state the
coordinator acted on survives the loss of its leader."""

from __future__ import annotations

from reference_broker.config import KafkaConfig
from reference_broker.server.admin_manager import AdminManager
from reference_broker.server.internal_topic import InternalTopic, InternalTopicSpec
from reference_broker.server.metadata_cache import MetadataCache
from reference_broker.server.replica_manager import ReplicaManager

TRANSACTION_STATE_TOPIC = "__transaction_state"
TRANSACTION_STATE_TOPIC_SPEC = InternalTopicSpec(
    TRANSACTION_STATE_TOPIC, "transaction.state.log.num.partitions",
    "transaction.state.log.replication.factor", "transaction.state.log.segment.bytes",
    "request.timeout.ms", min_isr_key="transaction.state.log.min.isr")


class TransactionStateTopic(InternalTopic):
    def __init__(self, config: KafkaConfig, admin: AdminManager, cache: MetadataCache,
                 replicas: ReplicaManager) -> None:
        super().__init__(config, admin, cache, replicas, TRANSACTION_STATE_TOPIC_SPEC)
