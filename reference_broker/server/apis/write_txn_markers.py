"""WriteTxnMarkers (api key 27): a transaction coordinator has partition leaders end a
transaction by appending its COMMIT or ABORT marker (KIP-98).

Sent broker to broker, yet Kafka 3.9 brokers advertise it to everyone (it is an API of the
broker listener in ZooKeeper and KRaft mode alike), so it is registered as any client API is.
For each marker and partition the leader appends the control batch and answers once the ISR
has it, as an acks=all produce (Kafka appends with the coordinator as origin, required acks -1
and the broker's request timeout); a partition this broker does not lead answers
NOT_LEADER_OR_FOLLOWER, an unknown one UNKNOWN_TOPIC_OR_PARTITION, each on its own.
"""

from __future__ import annotations

import asyncio
from typing import Any

from harness.wire.control_records import ControlType, EndTxnMarker
from harness.wire.errors import ErrorCode
from reference_broker.server import topic_config
from reference_broker.server.api_registry import api
from reference_broker.server.broker_services import BrokerServices
from reference_broker.server.offsets_topic import OFFSETS_TOPIC

WRITE_TXN_MARKERS = 27
# Kafka's request.timeout.ms default: how long the coordinator's marker append may wait for
# the ISR before it answers REQUEST_TIMED_OUT (the coordinator then retries the marker).
MARKER_APPEND_TIMEOUT_S = 30.0

# (the partition's result dict, topic, partition, offset the ISR must reach, min ISR)
_Waiting = tuple[dict[str, Any], str, int, int, int]
# A written marker of an offsets partition: (partition, producer id, commit?)
_OffsetsMarker = tuple[int, int, bool]


@api(WRITE_TXN_MARKERS, range(0, 2))  # Kafka 3.9: v0-v1; kio has no v0 (KIP-896)
async def handle_write_txn_markers(services: BrokerServices, request: Any,
                                   conn: Any) -> dict[str, Any]:
    markers = []
    waiting: list[_Waiting] = []
    offsets_markers: dict[int, _OffsetsMarker] = {}  # by id(result dict)
    for wire_marker in request.body.markers:
        marker = EndTxnMarker(
            ControlType.COMMIT if wire_marker.transaction_result else ControlType.ABORT,
            wire_marker.coordinator_epoch,
        )
        topics = []
        for topic in wire_marker.topics:
            partitions = [
                _append(services, marker, wire_marker.producer_id, wire_marker.producer_epoch,
                        topic.name, index, waiting)
                for index in topic.partition_indexes
            ]
            if topic.name == OFFSETS_TOPIC:
                for result in partitions:
                    offsets_markers[id(result)] = (result["partition_index"],
                                                   wire_marker.producer_id,
                                                   marker.control_type is ControlType.COMMIT)
            topics.append({"name": topic.name, "partitions": partitions})
        markers.append({"producer_id": wire_marker.producer_id, "topics": topics})
    outcomes = await asyncio.gather(*(
        services.replica_manager.wait_for_acks(topic, partition, required,
                                               MARKER_APPEND_TIMEOUT_S, min_isr)
        for _result, topic, partition, required, min_isr in waiting))
    for (result, *_), error in zip(waiting, outcomes, strict=True):
        result["error_code"] = error
        completed = offsets_markers.get(id(result))
        if completed is not None and error is ErrorCode.none:
            # The marker is in the offsets partition's ISR: its groups' pending transactional
            # offsets become offsets or are dropped (Kafka's scheduleHandleTxnCompletion).
            services.group_coordinator.complete_transactional_offsets(*completed)
    return {"markers": markers}


def _append(services: BrokerServices, marker: EndTxnMarker, producer_id: int,
            producer_epoch: int, topic_name: str, index: int,
            waiting: list[_Waiting]) -> dict[str, Any]:
    result: dict[str, Any] = {"partition_index": index}
    topic = services.metadata_cache.topic(topic_name)
    if topic is None:
        result["error_code"] = ErrorCode.unknown_topic_or_partition
        return result
    min_isr = topic_config.effective(services.config, topic.configs, "min.insync.replicas")
    outcome = services.replica_manager.append_txn_marker(
        topic_name, index, marker, producer_id, producer_epoch, min_isr)
    result["error_code"] = outcome.error
    if outcome.error is ErrorCode.none:
        waiting.append((result, topic_name, index, outcome.required_offset, min_isr))
    return result
