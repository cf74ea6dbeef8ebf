"""DescribeGroups v0-v5, ListGroups v0-v5 (state and type filters) and DeleteGroups v0-v2.

The broker advertises Kafka 3.9's ranges; DescribeGroups v6's GROUP_ID_NOT_FOUND (KIP-1043,
Kafka 4) is handled below but cannot be asked for.
"""

from __future__ import annotations

from typing import Any

from harness.wire.errors import ErrorCode
from reference_broker.coordinator.group import group_admin
from reference_broker.server.api_registry import api
from reference_broker.server.broker_services import BrokerServices

DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
DELETE_GROUPS = 42
NO_OPERATIONS = -(2**31)  # authorized operations not requested
NOT_FOUND_VERSION = 6  # KIP-1043: DescribeGroups v6 reports unknown groups as not found


@api(DESCRIBE_GROUPS, range(0, 6))  # Kafka 3.9: v0-v5
def handle_describe_groups(services: BrokerServices, request: Any,
                           conn: Any) -> dict[str, Any]:
    manager = services.group_coordinator.manager
    described = []
    for group_id in request.body.groups:
        summary = group_admin.describe_group(manager, group_id)
        error = summary.error
        if error is ErrorCode.none and request.api_version >= NOT_FOUND_VERSION \
                and group_id not in manager.groups:
            error = ErrorCode.group_id_not_found
        described.append({
            "error_code": error,
            "error_message": None,
            "group_id": group_id,
            "group_state": summary.state,
            "protocol_type": summary.protocol_type,
            "protocol_data": summary.protocol,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "client_host": m.client_host,
                         "member_metadata": m.metadata, "member_assignment": m.assignment}
                        for m in summary.members],
            "authorized_operations": NO_OPERATIONS,
        })
    return {"throttle_time": 0, "groups": described}


@api(LIST_GROUPS, range(0, 6))
def handle_list_groups(services: BrokerServices, request: Any, conn: Any) -> dict[str, Any]:
    body = request.body
    states = getattr(body, "states_filter", None)
    types = getattr(body, "types_filter", None)
    error, groups = group_admin.list_groups(services.group_coordinator.manager,
                                            set(states) if states else None,
                                            set(types) if types else None)
    return {"throttle_time": 0, "error_code": error, "groups": [
        {"group_id": g, "protocol_type": t, "group_state": s, "group_type": "classic"}
        for g, t, s in groups]}


@api(DELETE_GROUPS, range(0, 3))
def handle_delete_groups(services: BrokerServices, request: Any, conn: Any) -> dict[str, Any]:
    manager = services.group_coordinator.manager
    return {"throttle_time": 0, "results": [
        {"group_id": g, "error_code": group_admin.delete_group(manager, g)}
        for g in request.body.groups_names]}
