"""FindCoordinator v0-v6, batched keys from v4: the leader of the key's partition of its
internal topic — `__consumer_offsets` for a group (key type 0), `__transaction_state` for a
transactional id (key type 1).

Asking creates the topic on first use, as in Kafka; the coordinator may then still be loading,
which the coordinator's own requests (not this one) answer with COORDINATOR_LOAD_IN_PROGRESS.
There is no share-group coordinator (key type 2).
"""

from __future__ import annotations

from typing import Any

from harness.wire.errors import ErrorCode
from reference_broker.server.api_registry import api
from reference_broker.server.broker_services import BrokerServices
from reference_broker.server.internal_topic import InternalTopic

FIND_COORDINATOR = 10
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


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
    topic: InternalTopic
    if key_type == GROUP_KEY_TYPE:
        if not key:
            return _failed(ErrorCode.invalid_group_id, "the group id must not be empty")
        topic, partition = services.offsets_topic, \
            services.group_coordinator.manager.partition_for(key)
    elif key_type == TRANSACTION_KEY_TYPE:
        if not key:
            return _failed(ErrorCode.invalid_request, "the transactional id must not be empty")
        topic, partition = services.transaction_topic, \
            services.transaction_coordinator.manager.partition_for(key)
    else:
        return _failed(ErrorCode.invalid_request, f"key type {key_type} has no coordinator here")
    error = topic.ensure_exists()
    if error is not ErrorCode.none:
        return _failed(error, f"{topic.name} cannot be created yet")
    info = topic.leader_of(partition)
    broker = services.metadata_cache.broker(info.leader) if info is not None else None
    if broker is None:
        return _failed(ErrorCode.coordinator_not_available,
                       f"{topic.name}-{partition} has no leader")
    return {"error_code": ErrorCode.none, "error_message": None, "node_id": broker.broker_id,
            "host": broker.host, "port": broker.port}


def _failed(error: ErrorCode, message: str) -> dict[str, Any]:
    return {"error_code": error, "error_message": message, "node_id": -1, "host": "", "port": -1}
