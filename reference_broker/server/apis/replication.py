"""Controller → broker requests (LeaderAndIsr, UpdateMetadata, StopReplica, ControlledShutdown),
ElectLeaders, and OffsetsForLeaderEpoch, which followers and clients use to find where an epoch
ends."""

from __future__ import annotations

from typing import Any

from harness.wire.errors import ErrorCode
from harness.wire.protocol import ProtocolError
from reference_broker.server.api_registry import api
from reference_broker.server.broker_services import BrokerServices

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN = 4, 5, 6, 7
OFFSET_FOR_LEADER_EPOCH = 23
ELECT_LEADERS = 43


def _zk(services: BrokerServices) -> Any:
    if services.zk_broker is None:
        raise ProtocolError("controller requests are served only in ZooKeeper mode")
    return services.zk_broker


@api(LEADER_AND_ISR, range(4, 5), zk_only=True)
def handle_leader_and_isr(services: BrokerServices, request: Any, conn: Any) -> Any:
    zk = _zk(services)
    return zk.serialized(lambda: zk.leader_and_isr(request.body))


@api(UPDATE_METADATA, range(6, 7), zk_only=True)
def handle_update_metadata(services: BrokerServices, request: Any, conn: Any) -> Any:
    zk = _zk(services)
    return zk.serialized(lambda: zk.update_metadata(request.body))


@api(STOP_REPLICA, range(3, 4), zk_only=True)
def handle_stop_replica(services: BrokerServices, request: Any, conn: Any) -> Any:
    zk = _zk(services)
    return zk.serialized(lambda: zk.stop_replica(request.body))


@api(CONTROLLED_SHUTDOWN, range(3, 4), zk_only=True)
async def handle_controlled_shutdown(services: BrokerServices, request: Any,
                                     conn: Any) -> dict[str, Any]:
    _zk(services)
    body = request.body
    error, remaining = await services.controller.controlled_shutdown(body.broker_id,
                                                                     body.broker_epoch)
    return {"error_code": error, "remaining_partitions": [
        {"topic_name": t, "partition_index": p} for t, p in remaining]}


@api(OFFSET_FOR_LEADER_EPOCH, range(2, 5))
def handle_offset_for_leader_epoch(services: BrokerServices, request: Any,
                                   conn: Any) -> dict[str, Any]:
    body = request.body
    replica_id = getattr(body, "replica_id", -1)
    topics = []
    for t in body.topics:
        partitions = []
        for p in t.partitions:
            error, epoch, end = services.replica_manager.end_offset_for_epoch(
                t.topic, p.partition, p.leader_epoch, p.current_leader_epoch, replica_id)
            partitions.append({"error_code": error, "partition": p.partition,
                               "leader_epoch": epoch, "end_offset": end})
        topics.append({"topic": t.topic, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


@api(ELECT_LEADERS, range(0, 3))
async def handle_elect_leaders(services: BrokerServices, request: Any,
                               conn: Any) -> dict[str, Any]:
    body = request.body
    election_type = getattr(body, "election_type", 0)
    wanted = None if body.topic_partitions is None else [
        (t.topic, p) for t in body.topic_partitions for p in t.partitions]
    controller = services.controller
    if controller is None:
        # Standalone: every partition's only replica leads already.
        results = {
            (t, p): (ErrorCode.election_not_needed, None)
            if services.metadata_cache.partition(t, p) is not None
            else (ErrorCode.unknown_topic_or_partition, None)
            for t, p in wanted or []}
    elif not controller.is_active:
        results = {tp: (ErrorCode.not_controller, None) for tp in wanted or []}
    else:
        results = await controller.elect_leaders(election_type, wanted)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), (error, message) in sorted(results.items()):
        by_topic.setdefault(topic, []).append(
            {"partition_id": partition, "error_code": error, "error_message": message})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "replica_election_results": [
        {"topic": t, "partition_result": r} for t, r in by_topic.items()]}
