"""OffsetCommit, OffsetFetch and OffsetDelete: who may commit, what is kept, what is answered.

A commit is accepted from the current generation's members, or — with generation -1 and no
member id — from a "simple" consumer into an Empty (or new) group. It is written to
`__consumer_offsets` before it is acknowledged, so an acknowledged offset survives a restart.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.wire.group_records import RecordFormatError, subscribed_topics
from reference_broker.coordinator.group.group_coordinator import GroupConfig
from reference_broker.coordinator.group.group_metadata import (
    CommittedOffset,
    GroupMetadata,
    GroupState,
    TopicPartition,
)
from reference_broker.coordinator.group.group_metadata_manager import GroupMetadataManager


@dataclass(frozen=True)
class OffsetToCommit:
    offset: int
    leader_epoch: int
    metadata: str | None


class OffsetCommits:
    def __init__(self, manager: GroupMetadataManager, config: GroupConfig) -> None:
        self._manager = manager
        self._config = config

    def commit(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
               offsets: dict[TopicPartition, OffsetToCommit],
               retention_ms: int = -1) -> dict[TopicPartition, str]:
        """The error per partition; a group-level error is answered for every partition."""
        error, group = self._validate(group_id, member_id, instance_id, generation_id)
        if error != "NONE" or group is None:
            return dict.fromkeys(offsets, error)
        now = self._manager.now_ms()
        expire = now + retention_ms if retention_ms >= 0 else -1
        result: dict[TopicPartition, str] = {}
        accepted: dict[TopicPartition, CommittedOffset] = {}
        for tp, wanted in offsets.items():
            metadata = wanted.metadata or ""
            if len(metadata.encode()) > self._config.offset_metadata_max_bytes:
                result[tp] = "OFFSET_METADATA_TOO_LARGE"
            else:
                accepted[tp] = CommittedOffset(wanted.offset, wanted.leader_epoch, metadata,
                                               now, expire)
        if accepted:
            stored = self._manager.store_offsets(group, accepted)
            result.update(dict.fromkeys(accepted, stored))
        return {tp: result[tp] for tp in offsets}

    def _validate(self, group_id: str, member_id: str, instance_id: str | None,
                  generation_id: int) -> tuple[str, GroupMetadata | None]:
        error = "INVALID_GROUP_ID" if not group_id else self._manager.ownership_error(group_id)
        if error != "NONE":
            return error, None
        group = self._manager.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # A generation of a group this coordinator never saw: an older incarnation.
                return "ILLEGAL_GENERATION", None
            group = GroupMetadata(group_id, current_state_timestamp=self._manager.now_ms())
            self._manager.groups[group_id] = group
        if group.is_state(GroupState.DEAD):
            return "COORDINATOR_NOT_AVAILABLE", None
        if generation_id < 0 and group.is_state(GroupState.EMPTY):
            return "NONE", group
        if group.is_fenced(instance_id, member_id):
            return "FENCED_INSTANCE_ID", None
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            return "REBALANCE_IN_PROGRESS", None
        if not group.has_member(member_id):
            return "UNKNOWN_MEMBER_ID", None
        if generation_id != group.generation_id:
            return "ILLEGAL_GENERATION", None
        return "NONE", group

    def fetch(self, group_id: str, partitions: list[TopicPartition] | None
              ) -> tuple[str, dict[TopicPartition, CommittedOffset | None]]:
        """(group error, committed offset or None per partition; every one when `partitions`
        is None). No transactional commits exist here, so `require_stable` never waits."""
        error = "INVALID_GROUP_ID" if not group_id else self._manager.ownership_error(group_id)
        if error != "NONE":
            return error, {}
        group = self._manager.groups.get(group_id)
        committed = group.offsets if group is not None else {}
        if partitions is None:
            return "NONE", dict(committed)
        return "NONE", {tp: committed.get(tp) for tp in partitions}

    def delete(self, group_id: str, partitions: list[TopicPartition]
               ) -> tuple[str, dict[TopicPartition, str]]:
        """OffsetDelete: refused per partition while a live consumer group subscribes to it."""
        error = "INVALID_GROUP_ID" if not group_id else self._manager.ownership_error(group_id)
        if error != "NONE":
            return error, {}
        group = self._manager.groups.get(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return "GROUP_ID_NOT_FOUND", {}
        subscribed: frozenset[str] = frozenset()
        if not group.is_state(GroupState.EMPTY):
            if group.protocol_type != "consumer":
                return "NON_EMPTY_GROUP", {}
            subscribed = _subscriptions(group)
        result = {tp: "GROUP_SUBSCRIBED_TO_TOPIC" for tp in partitions if tp[0] in subscribed}
        deletable = [tp for tp in partitions if tp not in result]
        stored = self._manager.delete_offsets(group, deletable)
        result.update(dict.fromkeys(deletable, stored))
        return "NONE", {tp: result[tp] for tp in partitions}


def _subscriptions(group: GroupMetadata) -> frozenset[str]:
    topics: set[str] = set()
    for member in group.members.values():
        for _name, metadata in member.protocols:
            try:
                topics |= subscribed_topics(metadata)
            except RecordFormatError:
                continue
    return frozenset(topics)
