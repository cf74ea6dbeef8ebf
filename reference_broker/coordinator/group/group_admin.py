"""DescribeGroups, ListGroups and DeleteGroups: what operators and admin clients see of groups."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.wire.errors import ErrorCode
from reference_broker.coordinator.group.group_metadata import GroupState
from reference_broker.coordinator.group.group_metadata_manager import GroupMetadataManager


@dataclass(frozen=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupSummary:
    error: ErrorCode
    group_id: str
    state: str = GroupState.DEAD.value
    protocol_type: str = ""
    protocol: str = ""
    members: list[MemberSummary] = field(default_factory=list)


def describe_group(manager: GroupMetadataManager, group_id: str) -> GroupSummary:
    """An unknown group is described as Dead with no error, as Kafka does. Member metadata and
    assignments are only meaningful, and only shown, once the group is Stable."""
    error = manager.ownership_error(group_id)
    if error is not ErrorCode.none:
        return GroupSummary(error, group_id, state="")
    group = manager.groups.get(group_id)
    if group is None:
        return GroupSummary(ErrorCode.none, group_id)
    stable = group.is_state(GroupState.STABLE)
    members = [
        MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                      m.metadata_for(group.protocol_name) if stable and group.protocol_name
                      else b"", m.assignment if stable else b"")
        for m in group.members.values()
    ]
    return GroupSummary(ErrorCode.none, group_id, group.state.value, group.protocol_type or "",
                        (group.protocol_name or "") if stable else "", members)


def list_groups(manager: GroupMetadataManager, states: set[str] | None,
                types: set[str] | None) -> tuple[ErrorCode, list[tuple[str, str, str]]]:
    """(error, [(group id, protocol type, state)]); filters match case-insensitively as in
    Kafka, and every group here is of the "classic" type."""
    if manager.loading:
        return ErrorCode.coordinator_load_in_progress, []
    wanted_states = {s.lower() for s in states} if states else None
    if types and "classic" not in {t.lower() for t in types}:
        return ErrorCode.none, []
    listed = [(g.group_id, g.protocol_type or "", g.state.value)
              for g in manager.groups.values()
              if not g.is_state(GroupState.DEAD)
              and (wanted_states is None or g.state.value.lower() in wanted_states)]
    return ErrorCode.none, sorted(listed)


def delete_group(manager: GroupMetadataManager, group_id: str) -> ErrorCode:
    error = ErrorCode.invalid_group_id if not group_id else manager.ownership_error(group_id)
    if error is not ErrorCode.none:
        return error
    group = manager.groups.get(group_id)
    if group is None or group.is_state(GroupState.DEAD):
        return ErrorCode.group_id_not_found
    if not group.is_state(GroupState.EMPTY):
        return ErrorCode.non_empty_group
    return manager.delete_group(group)
