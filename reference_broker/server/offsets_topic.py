"""`__consumer_offsets` as the group coordinator sees it: an internal topic
(`server/internal_topic.py`) shaped by the offsets.topic.* and offsets.commit.* settings."""

from __future__ import annotations

from reference_broker.config import KafkaConfig
from reference_broker.server.admin_manager import AdminManager
from reference_broker.server.internal_topic import InternalTopic, InternalTopicSpec
from reference_broker.server.metadata_cache import MetadataCache
from reference_broker.server.replica_manager import ReplicaManager

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_SPEC = InternalTopicSpec(
    OFFSETS_TOPIC, "offsets.topic.num.partitions", "offsets.topic.replication.factor",
    "offsets.topic.segment.bytes", "offsets.commit.timeout.ms",
    required_acks_key="offsets.commit.required.acks")


class OffsetsTopic(InternalTopic):
    def __init__(self, config: KafkaConfig, admin: AdminManager, cache: MetadataCache,
                 replicas: ReplicaManager) -> None:
        super().__init__(config, admin, cache, replicas, OFFSETS_TOPIC_SPEC)
