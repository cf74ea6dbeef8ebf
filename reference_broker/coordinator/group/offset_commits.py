"""OffsetCommit, OffsetFetch and OffsetDelete: who may commit, what is kept, what is answered.

A commit is accepted from the current generation's members, or — with generation -1 — from a
"simple" consumer into an Empty (or new) group; the member and generation are checked before
the group's state, as Kafka does. It is written to `__consumer_offsets` before it is
acknowledged, so an acknowledged offset survives a restart.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.wire.errors import ErrorCode
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
               retention_ms: int = -1) -> dict[TopicPartition, ErrorCode]:
        """The error per partition; a group-level error is answered for every partition."""
        error, group = self._validate(group_id, member_id, instance_id, generation_id)
        return self._store(error, group, offsets, retention_ms, None)

    def _store(self, error: ErrorCode, group: GroupMetadata | None,
               offsets: dict[TopicPartition, OffsetToCommit], retention_ms: int,
               producer: tuple[int, int] | None) -> dict[TopicPartition, ErrorCode]:
        """Write what a validated commit may keep: metadata over offset.metadata.max.bytes is
        refused per partition, the rest is stored (pending, for a transactional commit)."""
        if error is not ErrorCode.none or group is None:
            return dict.fromkeys(offsets, error)
        now = self._manager.now_ms()
        expire = now + retention_ms if retention_ms >= 0 else -1
        result: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, CommittedOffset] = {}
        for tp, wanted in offsets.items():
            metadata = wanted.metadata or ""
            if len(metadata.encode()) > self._config.offset_metadata_max_bytes:
                result[tp] = ErrorCode.offset_metadata_too_large
            else:
                accepted[tp] = CommittedOffset(wanted.offset, wanted.leader_epoch, metadata,
                                               now, expire)
        if accepted:
            stored = self._manager.store_offsets(group, accepted, producer)
            result.update(dict.fromkeys(accepted, stored))
        return {tp: result[tp] for tp in offsets}

    def txn_commit(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                   instance_id: str | None, generation_id: int,
                   offsets: dict[TopicPartition, OffsetToCommit]
                   ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: the offsets are written as the producer's transactional batch and
        stay pending — invisible to OffsetFetch — until the transaction's marker reaches the
        offsets partition (`GroupCoordinator.complete_transactional_offsets`). KIP-447: a
        member id and generation, when given, must be the group's current ones."""
        error, group = self._validate_txn(group_id, member_id, instance_id, generation_id)
        return self._store(error, group, offsets, -1, (producer_id, producer_epoch))

    def _validate_txn(self, group_id: str, member_id: str, instance_id: str | None,
                      generation_id: int) -> tuple[ErrorCode, GroupMetadata | None]:
        """Kafka's order for a transactional commit: Dead, a fenced static member, an unknown
        member (when one is named), a generation that is not the group's (when one is given)."""
        error = self._group_error(group_id)
        if error is not ErrorCode.none:
            return error, None
        group = self._manager.groups.get(group_id)
        if group is None:
            group = GroupMetadata(group_id, current_state_timestamp=self._manager.now_ms())
            self._manager.groups[group_id] = group
        if group.is_state(GroupState.DEAD):
            return ErrorCode.coordinator_not_available, None
        if group.is_fenced(instance_id, member_id):
            return ErrorCode.fenced_instance_id, None
        if member_id and not group.has_member(member_id):
            return ErrorCode.unknown_member_id, None
        if generation_id >= 0 and generation_id != group.generation_id:
            return ErrorCode.illegal_generation, None
        return ErrorCode.none, group

    def _validate(self, group_id: str, member_id: str, instance_id: str | None,
                  generation_id: int) -> tuple[ErrorCode, GroupMetadata | None]:
        error = self._group_error(group_id)
        if error is not ErrorCode.none:
            return error, None
        group = self._manager.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # A generation of a group this coordinator never saw: an older incarnation.
                return ErrorCode.illegal_generation, None
            group = GroupMetadata(group_id, current_state_timestamp=self._manager.now_ms())
            self._manager.groups[group_id] = group
        if group.is_state(GroupState.DEAD):
            return ErrorCode.coordinator_not_available, None
        if generation_id < 0 and group.is_state(GroupState.EMPTY):
            return ErrorCode.none, group  # a simple commit, whatever member id it names
        # Who commits is checked before the state is (Kafka's validateOffsetCommit): a client
        # told ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID resets its membership, where
        # REBALANCE_IN_PROGRESS would only make it rejoin as the member it no longer is.
        if group.is_fenced(instance_id, member_id):
            return ErrorCode.fenced_instance_id, None
        if not group.has_member(member_id):
            return ErrorCode.unknown_member_id, None
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation, None
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.rebalance_in_progress, None
        return ErrorCode.none, group

    def fetch(self, group_id: str, partitions: list[TopicPartition] | None,
              require_stable: bool = False
              ) -> tuple[ErrorCode, dict[TopicPartition, CommittedOffset | None],
                         frozenset[TopicPartition]]:
        """(group error, committed offset or None per partition — every one when `partitions`
        is None —, and with `require_stable` the partitions a pending transaction may still
        change, which OffsetFetch answers UNSTABLE_OFFSET_COMMIT, KIP-447)."""
        error = self._group_error(group_id)
        if error is not ErrorCode.none:
            return error, {}, frozenset()
        group = self._manager.groups.get(group_id)
        committed = group.offsets if group is not None else {}
        fetched: dict[TopicPartition, CommittedOffset | None] = dict(committed) \
            if partitions is None \
            else {tp: committed.get(tp) for tp in partitions}
        unstable = frozenset(tp for tp in fetched if require_stable and group is not None
                             and group.has_pending_txn_offset(tp))
        return ErrorCode.none, fetched, unstable

    def delete(self, group_id: str, partitions: list[TopicPartition]
               ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: refused per partition while a live consumer group subscribes to it."""
        error = self._group_error(group_id)
        if error is not ErrorCode.none:
            return error, {}
        group = self._manager.groups.get(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return ErrorCode.group_id_not_found, {}
        subscribed: frozenset[str] = frozenset()
        if not group.is_state(GroupState.EMPTY):
            if group.protocol_type != "consumer":
                return ErrorCode.non_empty_group, {}
            subscribed = _subscriptions(group)
        result = {tp: ErrorCode.group_subscribed_to_topic
                  for tp in partitions if tp[0] in subscribed}
        deletable = [tp for tp in partitions if tp not in result]
        stored = self._manager.delete_offsets(group, deletable)
        result.update(dict.fromkeys(deletable, stored))
        return ErrorCode.none, {tp: result[tp] for tp in partitions}

    def group_status(self, group_id: str) -> ErrorCode:
        """Whether this coordinator may take a commit for the group at all (Kafka's
        validateGroupStatus): an empty group id, a group coordinated elsewhere, or one still
        loading. A transactional commit is checked so before its verification is asked for,
        as Kafka's handleTxnCommitOffsets does; the member and generation after it."""
        return self._group_error(group_id)

    def _group_error(self, group_id: str) -> ErrorCode:
        if not group_id:
            return ErrorCode.invalid_group_id
        return self._manager.ownership_error(group_id)


def _subscriptions(group: GroupMetadata) -> frozenset[str]:
    topics: set[str] = set()
    for member in group.members.values():
        for _name, metadata in member.protocols:
            try:
                topics |= subscribed_topics(metadata)
            except RecordFormatError:
                continue
    return frozenset(topics)
