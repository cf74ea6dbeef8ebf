"""DescribeGroups, ListGroups and DeleteGroups: what operators and admin clients see of groups."""

from __future__ import annotations

from dataclasses import dataclass, field

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
    error: str
    group_id: str
    state: str = GroupState.DEAD.value
    protocol_type: str = ""
    protocol: str = ""
    members: list[MemberSummary] = field(default_factory=list)


def describe_group(manager: GroupMetadataManager, group_id: str) -> GroupSummary:
    """An unknown group is described as Dead with no error, as Kafka does. Member metadata and
    assignments are only meaningful, and only shown, once the group is Stable."""
    error = manager.ownership_error(group_id)
    if error != "NONE":
        return GroupSummary(error, group_id, state="")
    group = manager.groups.get(group_id)
    if group is None:
        return GroupSummary("NONE", group_id)
    stable = group.is_state(GroupState.STABLE)
    members = [
        MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                      m.metadata_for(group.protocol_name) if stable and group.protocol_name
                      else b"", m.assignment if stable else b"")
        for m in group.members.values()
    ]
    return GroupSummary("NONE", group_id, group.state.value, group.protocol_type or "",
                        (group.protocol_name or "") if stable else "", members)


def list_groups(manager: GroupMetadataManager, states: set[str] | None,
                types: set[str] | None) -> tuple[str, list[tuple[str, str, str]]]:
    """(error, [(group id, protocol type, state)]); filters match case-insensitively as in
    Kafka, and every group here is of the "classic" type."""
    if manager.loading:
        return "COORDINATOR_LOAD_IN_PROGRESS", []
    wanted_states = {s.lower() for s in states} if states else None
    if types and "classic" not in {t.lower() for t in types}:
        return "NONE", []
    listed = [(g.group_id, g.protocol_type or "", g.state.value)
              for g in manager.groups.values()
              if not g.is_state(GroupState.DEAD)
              and (wanted_states is None or g.state.value.lower() in wanted_states)]
    return "NONE", sorted(listed)


def delete_group(manager: GroupMetadataManager, group_id: str) -> str:
    error = "INVALID_GROUP_ID" if not group_id else manager.ownership_error(group_id)
    if error != "NONE":
        return error
    group = manager.groups.get(group_id)
    if group is None or group.is_state(GroupState.DEAD):
        return "GROUP_ID_NOT_FOUND"
    if not group.is_state(GroupState.EMPTY):
        return "NON_EMPTY_GROUP"
    return manager.delete_group(group)
