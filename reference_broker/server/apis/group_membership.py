"""JoinGroup v0-v9, SyncGroup v0-v5, Heartbeat v0-v4, LeaveGroup v0-v5: wire ↔ coordinator.

The protocol rules live in the coordinator; this module only translates each version's fields
(v0 JoinGroup has no rebalance timeout, v4+ requires a known member id, v5 SyncGroup carries the
protocol type and name, v3+ LeaveGroup leaves in batches) and shapes the answers.
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Callable
from typing import Any

from harness.wire.errors import ErrorCode
from reference_broker.coordinator.group.group_coordinator import JoinRequest, JoinResult
from reference_broker.server.api_registry import api
from reference_broker.server.broker_services import BrokerServices

JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
NULLABLE_PROTOCOL_VERSION = 7  # JoinGroup v7+: protocol type and name may be null


def millis(value: datetime.timedelta | int) -> int:
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


def client_host(conn: Any) -> str:
    """Kafka shows the member's address as Java's InetAddress.toString does: "/host"."""
    return "/" + conn.peer.rsplit(":", 1)[0]


def in_connection_order(handler: Callable[[BrokerServices, Any, Any], Any]
                        ) -> Callable[[BrokerServices, Any, Any], Any]:
    """Run a group request only after the connection's earlier group requests (request_order)."""

    @functools.wraps(handler)
    def ordered(services: BrokerServices, request: Any, conn: Any) -> Any:
        return services.group_request_order.run(
            conn.id, lambda: handler(services, request, conn))

    return ordered


@api(JOIN_GROUP, range(0, 10))
@in_connection_order
async def handle_join_group(services: BrokerServices, request: Any, conn: Any) -> dict[str, Any]:
    body = request.body
    session_ms = millis(body.session_timeout)
    rebalance = getattr(body, "rebalance_timeout", None)
    joined = await services.group_coordinator.join_group(JoinRequest(
        group_id=body.group_id, member_id=body.member_id,
        group_instance_id=getattr(body, "group_instance_id", None),
        client_id=request.client_id or "", client_host=client_host(conn),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=session_ms if rebalance is None else millis(rebalance),
        protocol_type=body.protocol_type,
        protocols=[(p.name, p.metadata) for p in body.protocols],
        require_known_member_id=request.api_version >= 4))
    return join_response(joined, request.api_version)


def join_response(joined: JoinResult, version: int) -> dict[str, Any]:
    nullable = version >= NULLABLE_PROTOCOL_VERSION
    return {
        "throttle_time": 0,
        "error_code": joined.error,
        "generation_id": joined.generation_id,
        "protocol_type": joined.protocol_type if nullable else joined.protocol_type or "",
        "protocol_name": joined.protocol_name if nullable else joined.protocol_name or "",
        "leader": joined.leader_id,
        "skip_assignment": joined.skip_assignment,
        "member_id": joined.member_id,
        "members": [{"member_id": m, "group_instance_id": i, "metadata": meta}
                    for m, i, meta in joined.members],
    }


@api(SYNC_GROUP, range(0, 6))
@in_connection_order
async def handle_sync_group(services: BrokerServices, request: Any, conn: Any) -> dict[str, Any]:
    body = request.body
    if request.api_version >= 5 and (body.protocol_type is None or body.protocol_name is None):
        # KIP-559: mandatory from v5; Kafka refuses a null one before looking at the group.
        return {"throttle_time": 0, "error_code": ErrorCode.inconsistent_group_protocol,
                "assignment": b"", "protocol_type": None, "protocol_name": None}
    synced = await services.group_coordinator.sync_group(
        body.group_id, body.generation_id, body.member_id,
        getattr(body, "group_instance_id", None), getattr(body, "protocol_type", None),
        getattr(body, "protocol_name", None),
        {a.member_id: a.assignment for a in body.assignments})
    return {"throttle_time": 0, "error_code": synced.error, "assignment": synced.assignment,
            "protocol_type": synced.protocol_type, "protocol_name": synced.protocol_name}


@api(HEARTBEAT, range(0, 5))
@in_connection_order
def handle_heartbeat(services: BrokerServices, request: Any, conn: Any) -> dict[str, Any]:
    body = request.body
    error = services.group_coordinator.heartbeat(
        body.group_id, body.member_id, getattr(body, "group_instance_id", None),
        body.generation_id)
    return {"throttle_time": 0, "error_code": error}


@api(LEAVE_GROUP, range(0, 6))
@in_connection_order
def handle_leave_group(services: BrokerServices, request: Any, conn: Any) -> dict[str, Any]:
    body = request.body
    coordinator = services.group_coordinator
    if request.api_version < 3:
        error, (member_error,) = coordinator.leave_group(body.group_id, [(body.member_id, None)])
        return {"throttle_time": 0,
                "error_code": member_error if error is ErrorCode.none else error}
    leaving = [(m.member_id, m.group_instance_id) for m in body.members]
    error, errors = coordinator.leave_group(body.group_id, leaving)
    return {
        "throttle_time": 0,
        "error_code": error,
        "members": [] if error is not ErrorCode.none else [
            {"member_id": m, "group_instance_id": i, "error_code": e}
            for (m, i), e in zip(leaving, errors, strict=True)],
    }
