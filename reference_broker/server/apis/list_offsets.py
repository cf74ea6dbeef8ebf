"""ListOffsets: earliest, latest, by timestamp (time index) and max timestamp (KIP-734);
read_committed (isolation level 1) answers LATEST with the last stable offset."""

from __future__ import annotations

from typing import Any

from harness.wire.errors import ErrorCode
from reference_broker.cluster.partition import IsolationLevel
from reference_broker.server.api_registry import api
from reference_broker.server.broker_services import BrokerServices

LIST_OFFSETS = 2


@api(LIST_OFFSETS, range(1, 10))  # Kafka 3.9: v0-v9; kio has no v0
def handle_list_offsets(services: BrokerServices, request: Any, conn: Any) -> dict[str, Any]:
    body = request.body
    replicas = services.replica_manager
    isolation = IsolationLevel.from_wire(getattr(body, "isolation_level", 0))
    topics = []
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            error, ts, offset, epoch = replicas.offset_for_timestamp(
                topic.name, p.partition_index, p.timestamp, isolation)
            current_epoch = getattr(p, "current_leader_epoch", -1)
            if error is ErrorCode.none and current_epoch >= 0 and current_epoch != epoch:
                error = ErrorCode.fenced_leader_epoch if current_epoch < epoch \
                    else ErrorCode.unknown_leader_epoch
                ts, offset = -1, -1
            partitions.append({"partition_index": p.partition_index, "error_code": error,
                               "timestamp": ts, "offset": offset, "leader_epoch": epoch})
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
