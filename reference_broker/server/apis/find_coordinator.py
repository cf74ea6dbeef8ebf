"""FindCoordinator v0-v6, batched keys from v4: the leader of the group's offsets partition.

Asking creates `__consumer_offsets` on first use, as in Kafka; the coordinator may then still be
loading, which the group requests (not this one) answer with COORDINATOR_LOAD_IN_PROGRESS.
Only group keys are served: this broker has no transaction or share-group coordinator.
"""

from __future__ import annotations

from typing import Any

from harness.wire.errors import ErrorCode
from reference_broker.server.api_registry import api
from reference_broker.server.broker_services import BrokerServices

FIND_COORDINATOR = 10
GROUP_KEY_TYPE = 0


@api(FIND_COORDINATOR, range(0, 7))
def handle_find_coordinator(services: BrokerServices, request: Any,
                            conn: Any) -> dict[str, Any]:
    body = request.body
    key_type = getattr(body, "key_type", GROUP_KEY_TYPE)
    if request.api_version >= 4:
        return {"throttle_time": 0,
                "coordinators": [{"key": key, **find(services, key, key_type)}
                                 for key in body.coordinator_keys]}
    return {"throttle_time": 0, **find(services, body.key, key_type)}


def find(services: BrokerServices, key: str, key_type: int) -> dict[str, Any]:
    if key_type != GROUP_KEY_TYPE:
        return _failed(ErrorCode.invalid_request, f"key type {key_type} has no coordinator here")
    if not key:
        return _failed(ErrorCode.invalid_group_id, "the group id must not be empty")
    error = services.offsets_topic.ensure_exists()
    if error is not ErrorCode.none:
        return _failed(error, "the offsets topic cannot be created yet")
    partition = services.group_coordinator.manager.partition_for(key)
    info = services.offsets_topic.leader_of(partition)
    broker = services.metadata_cache.broker(info.leader) if info is not None else None
    if broker is None:
        return _failed(ErrorCode.coordinator_not_available, "the offsets partition has no leader")
    return {"error_code": ErrorCode.none, "error_message": None, "node_id": broker.broker_id,
            "host": broker.host, "port": broker.port}


def _failed(error: ErrorCode, message: str) -> dict[str, Any]:
    return {"error_code": error, "error_message": message, "node_id": -1, "host": "", "port": -1}
