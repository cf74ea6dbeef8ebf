"""DescribeProducers v0 (KIP-664): the producers a partition leader remembers, with each one's
epoch, last sequence and timestamp, coordinator epoch and the first offset of its open
transaction — what an operator reads to find a hanging transaction (one that holds the last
stable offset back and that no coordinator will end).

Answered from the leader's producer state (`log/producer_state.py`), as Kafka's
`Partition.activeProducerState` does: a replica that is not the leader answers
NOT_LEADER_OR_FOLLOWER, and so does a broker that hosts no replica of a partition the cluster
has (Kafka's `getPartitionOrError`); a partition the cluster does not have is
UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from typing import Any

from harness.wire.errors import ErrorCode
from reference_broker.server.api_registry import api
from reference_broker.server.broker_services import BrokerServices

DESCRIBE_PRODUCERS = 61


def _partition(services: BrokerServices, topic: str, index: int) -> dict[str, Any]:
    answer: dict[str, Any] = {"partition_index": index, "error_message": None,
                              "active_producers": []}
    part = services.replica_manager.partition(topic, index)
    if part is None or not part.is_leader:
        info = services.metadata_cache.topic(topic)
        known = part is not None or (info is not None and index in info.partitions)
        answer["error_code"] = (ErrorCode.not_leader_or_follower if known
                                else ErrorCode.unknown_topic_or_partition)
        return answer
    answer["error_code"] = ErrorCode.none
    answer["active_producers"] = [
        {"producer_id": entry.producer_id, "producer_epoch": entry.producer_epoch,
         "last_sequence": entry.last_seq, "last_timestamp": entry.last_timestamp,
         "coordinator_epoch": entry.coordinator_epoch,
         "current_txn_start_offset": entry.current_txn_first_offset}
        for entry in part.log.producer_state.active_producers()]
    return answer


@api(DESCRIBE_PRODUCERS, range(0, 1))  # Kafka 3.9: v0
def handle_describe_producers(services: BrokerServices, request: Any,
                              conn: Any) -> dict[str, Any]:
    return {"throttle_time": 0, "topics": [
        {"name": topic.name,
         "partitions": [_partition(services, topic.name, index)
                        for index in topic.partition_indexes]}
        for topic in request.body.topics]}
