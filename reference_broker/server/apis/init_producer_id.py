"""InitProducerId v0-v5: idempotent producers get a producer id from the broker's block; a
transactional id is the transaction coordinator's (KIP-98), with KIP-360's producer id and
epoch from v3 on, and PRODUCER_FENCED told INVALID_PRODUCER_EPOCH before v4 (KIP-588)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from harness.wire.errors import ErrorCode
from reference_broker.server.api_registry import api
from reference_broker.server.apis.group_membership import millis
from reference_broker.server.apis.transactions import fenced_for
from reference_broker.server.broker_services import BrokerServices

INIT_PRODUCER_ID = 22
NO_PRODUCER_ID = -1


@api(INIT_PRODUCER_ID, range(0, 6))  # Kafka 3.9: v0-v5
def handle_init_producer_id(
    services: BrokerServices, request: Any, conn: Any
) -> dict[str, Any] | Awaitable[dict[str, Any]]:
    body = request.body
    producer_id = getattr(body, "producer_id", NO_PRODUCER_ID)
    epoch = getattr(body, "producer_epoch", NO_PRODUCER_ID)
    if body.transactional_id is not None:
        return _transactional(services, request, producer_id, epoch)
    error, producer_id, epoch = services.admin_manager.init_producer_id(producer_id, epoch)
    return {"throttle_time": 0, "error_code": error, "producer_id": producer_id,
            "producer_epoch": epoch}


async def _transactional(services: BrokerServices, request: Any, producer_id: int,
                         epoch: int) -> dict[str, Any]:
    body = request.body
    failed = {"throttle_time": 0, "producer_id": NO_PRODUCER_ID,
              "producer_epoch": NO_PRODUCER_ID}
    if (producer_id == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_ID):
        return {**failed, "error_code": ErrorCode.invalid_request}
    expected = None if producer_id == NO_PRODUCER_ID else (producer_id, epoch)
    result = await services.transaction_coordinator.init_producer_id(
        body.transactional_id, millis(body.transaction_timeout), expected)
    error = fenced_for(INIT_PRODUCER_ID, request.api_version, result.error)
    if error is not ErrorCode.none:
        return {**failed, "error_code": error}
    return {"throttle_time": 0, "error_code": error, "producer_id": result.producer_id,
            "producer_epoch": result.producer_epoch}
