"""InitProducerId for idempotent producers (transactions are not implemented)."""

from __future__ import annotations

from typing import Any

from harness.wire.errors import ErrorCode
from reference_broker.server.api_registry import api
from reference_broker.server.broker_services import BrokerServices

INIT_PRODUCER_ID = 22


@api(INIT_PRODUCER_ID, range(0, 6))  # Kafka 3.9: v0-v5
def handle_init_producer_id(services: BrokerServices, request: Any, conn: Any) -> dict[str, Any]:
    body = request.body
    base = {"throttle_time": 0, "producer_id": -1, "producer_epoch": -1}
    if body.transactional_id is not None:
        # No transaction coordinator: say so the way a broker without one would.
        return {**base, "error_code": ErrorCode.coordinator_not_available}
    error, producer_id, epoch = services.admin_manager.init_producer_id(
        getattr(body, "producer_id", -1), getattr(body, "producer_epoch", -1))
    return {**base, "error_code": error, "producer_id": producer_id, "producer_epoch": epoch}
