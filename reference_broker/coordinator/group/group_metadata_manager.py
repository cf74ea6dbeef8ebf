"""Groups and committed offsets kept on `__consumer_offsets` (Kafka's GroupMetadataManager).

The coordinator's memory is a cache of the offsets topic: every commit, every completed
rebalance and every deletion is appended there first (in Kafka's own key/value layouts, see
`harness.wire.group_records`), and on taking over an offsets partition the cache is rebuilt by
replaying it. Until that replay is finished the partition's groups answer
COORDINATOR_LOAD_IN_PROGRESS. As in Kafka, partitions are replayed one at a time (Kafka's
GroupMetadataManager loads on a scheduler with one thread) and the broker keeps answering
requests meanwhile (the replay yields to the event loop every few hundred records), so a client
of a restarted coordinator really meets COORDINATOR_LOAD_IN_PROGRESS — Apache Kafka 3.9 answers
it for a few hundred milliseconds after a restart even with little to replay. A configurable
delay before the replay makes that window as long as a unit test needs.

The manager does not know how records reach the log: the server hands it two callables at
start-up (append to an offsets partition, read one back), which is what lets the cluster mode
move partitions between brokers without this module importing the server.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from harness.wire.errors import ErrorCode
from harness.wire.group_records import (
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    RecordFormatError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from reference_broker.coordinator.common import (
    APPEND_ERRORS,
    AppendToPartition,
    ControlType,
    CoordinatorPartitions,
    KeyValue,
    ProducerIdAndEpoch,
    ReadPartition,
    replay,
    wall_clock_ms,
)
from reference_broker.coordinator.group.group_metadata import (
    CommittedOffset,
    GroupMetadata,
    GroupState,
    MemberMetadata,
    TopicPartition,
)

log = logging.getLogger("reference_broker.coordinator.group")


@dataclass(frozen=True)
class _Replayed:
    groups: dict[str, GroupValue]
    offsets: dict[str, dict[TopicPartition, OffsetValue]]
    # producer id -> group -> offsets of a transaction whose marker is not in the log yet
    pending: dict[int, dict[str, dict[TopicPartition, OffsetValue]]]


class GroupMetadataManager(CoordinatorPartitions):
    def __init__(self, num_partitions: int, append: AppendToPartition, read: ReadPartition,
                 *, load_delay_ms: int = 0, now_ms: Callable[[], int] = wall_clock_ms) -> None:
        super().__init__(num_partitions)
        self._append = append
        self._read = read
        self._load_delay_s = load_delay_ms / 1000
        self.now_ms = now_ms
        self.groups: dict[str, GroupMetadata] = {}
        self._loader: asyncio.Lock | None = None  # one replay at a time; made on the loop

    # --- loading and unloading ---------------------------------------------------------------

    async def load_partition(self, partition: int,
                             on_loaded: Callable[[GroupMetadata], None]) -> None:
        """Become coordinator of `partition`: refuse its groups while the replay runs."""
        if partition in self.owned:
            return
        self.owned.add(partition)
        self.loading.add(partition)
        started = time.monotonic()
        log.debug("Loading group metadata from __consumer_offsets-%d", partition)
        if self._loader is None:
            self._loader = asyncio.Lock()
        try:
            async with self._loader:
                if self._load_delay_s > 0:
                    await asyncio.sleep(self._load_delay_s)
                replayed = await self._replay(partition)
            if replayed is None:
                return  # resigned while waiting or replaying: the new leader loads it
            for group in self._restore(replayed):
                self.groups[group.group_id] = group
                on_loaded(group)
        finally:
            self.loading.discard(partition)
        loaded = sum(1 for g in self.groups if self.partition_for(g) == partition)
        # Fifty empty partitions load at every start; only say so when it means something.
        log.log(logging.INFO if loaded or self._load_delay_s else logging.DEBUG,
                "Finished loading %d group(s) from __consumer_offsets-%d in %d ms", loaded,
                partition, (time.monotonic() - started) * 1000)

    async def _replay(self, partition: int) -> _Replayed | None:
        """The partition's groups and offsets as its log ends, or None if this broker stopped
        leading the partition before the replay finished."""
        groups: dict[str, GroupValue] = {}
        offsets: dict[str, dict[TopicPartition, OffsetValue]] = {}
        records = await replay(self._read, partition, self.owned)
        if records is None:
            return None
        pending: dict[int, dict[str, dict[TopicPartition, OffsetValue]]] = {}
        for record in records:
            if record.control is not None:
                # A transaction's marker: its offsets become the groups' or are dropped.
                for group_id, committed in pending.pop(record.producer_id, {}).items():
                    if record.control is ControlType.COMMIT:
                        offsets.setdefault(group_id, {}).update(committed)
                continue
            key_bytes, value_bytes = record.key, record.value
            if key_bytes is None:
                continue
            try:
                key = decode_key(key_bytes)
                if isinstance(key, OffsetKey):
                    into = pending.setdefault(record.producer_id, {}) if record.transactional \
                        else offsets
                    group_offsets = into.setdefault(key.group, {})
                    tp = (key.topic, key.partition)
                    if value_bytes is None:
                        group_offsets.pop(tp, None)
                    else:
                        group_offsets[tp] = decode_offset_value(value_bytes)
                elif value_bytes is None:
                    groups.pop(key.group, None)
                else:
                    groups[key.group] = decode_group_value(value_bytes)
            except RecordFormatError as exc:
                log.warning("Skipping unreadable record in __consumer_offsets-%d: %s",
                            partition, exc)
        return _Replayed(groups, offsets, pending)

    def _restore(self, replayed: _Replayed) -> list[GroupMetadata]:
        restored = []
        pending_groups = {g for by_group in replayed.pending.values() for g in by_group}
        for group_id in set(replayed.groups) | {g for g, o in replayed.offsets.items() if o} \
                | pending_groups:
            value = replayed.groups.get(group_id)
            group = GroupMetadata(group_id)
            if value is not None:
                group.generation_id = value.generation
                group.protocol_type = value.protocol_type or None
                group.protocol_name = value.protocol
                group.current_state_timestamp = value.current_state_timestamp
                for m in value.members:
                    group.add(MemberMetadata(
                        m.member_id, m.group_instance_id, m.client_id, m.client_host,
                        m.rebalance_timeout_ms, m.session_timeout_ms, value.protocol_type,
                        [(value.protocol or "", m.subscription)], m.assignment))
                group.leader_id = value.leader if value.members else None
                group.new_member_added = False
                if value.members:
                    group.state = GroupState.STABLE
            for tp, o in replayed.offsets.get(group_id, {}).items():
                group.commit(tp, _committed(o))
            for producer_id, by_group in replayed.pending.items():
                if group_id in by_group:
                    group.add_pending_txn_offsets(
                        producer_id, {tp: _committed(o) for tp, o in by_group[group_id].items()})
            restored.append(group)
        return restored

    def unload_partition(self, partition: int) -> list[GroupMetadata]:
        """Give up `partition` (its leadership moved): its groups go Dead and leave the cache."""
        self.owned.discard(partition)
        self.loading.discard(partition)
        gone = [g for g in self.groups.values() if self.partition_for(g.group_id) == partition]
        now = self.now_ms()
        for group in gone:
            group.transition_to(GroupState.DEAD, now)
            del self.groups[group.group_id]
        return gone

    # --- writing -----------------------------------------------------------------------------

    def _write(self, group_id: str, records: list[KeyValue],
               producer: ProducerIdAndEpoch | None = None) -> ErrorCode:
        error = self._append(self.partition_for(group_id), records, producer)
        return APPEND_ERRORS.get(error, error)

    def store_group(self, group: GroupMetadata) -> ErrorCode:
        """Persist the group's generation and assignment (after SyncGroup or an emptied join)."""
        members = tuple(
            MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                        m.rebalance_timeout_ms, m.session_timeout_ms,
                        m.metadata_for(group.protocol_name) if group.protocol_name else b"",
                        m.assignment)
            for m in group.members.values())
        value = GroupValue(group.protocol_type or "", group.generation_id, group.protocol_name,
                           group.leader_id, group.current_state_timestamp, members)
        return self._write(group.group_id, [(encode_group_key(group.group_id),
                                             encode_group_value(value))])

    def store_offsets(self, group: GroupMetadata, offsets: dict[TopicPartition, CommittedOffset],
                      producer: ProducerIdAndEpoch | None = None) -> ErrorCode:
        """Write the offsets; applied at once, or — with `producer`, a TxnOffsetCommit, written
        as that producer's transactional batch — held pending until its transaction's marker
        (`complete_txn_offsets`)."""
        records: list[KeyValue] = [
            (encode_offset_key(group.group_id, topic, partition),
             encode_offset_value(OffsetValue(o.offset, o.leader_epoch, o.metadata,
                                             o.commit_timestamp, o.expire_timestamp)))
            for (topic, partition), o in offsets.items()
        ]
        error = self._write(group.group_id, records, producer)
        if error is ErrorCode.unknown_server_error:
            return ErrorCode.invalid_commit_offset_size
        if error is ErrorCode.none:
            if producer is not None:
                group.add_pending_txn_offsets(producer[0], offsets)
            else:
                for tp, o in offsets.items():
                    group.commit(tp, o)
        return error

    def complete_txn_offsets(self, partition: int, producer_id: int, commit: bool) -> int:
        """A transaction marker was written to offsets partition `partition`: the producer's
        pending offsets in its groups become committed, or are dropped. The groups touched."""
        return sum(group.complete_txn_offsets(producer_id, commit)
                   for group in list(self.groups.values())
                   if self.partition_for(group.group_id) == partition)

    def delete_offsets(self, group: GroupMetadata,
                       partitions: list[TopicPartition]) -> ErrorCode:
        """Tombstone the partitions' offsets (OffsetDelete, expiry). An Empty group left with
        none is deleted too, as Kafka's cleanupGroupMetadata does: nothing would keep it."""
        records: list[KeyValue] = [(encode_offset_key(group.group_id, t, p), None)
                                   for t, p in partitions if (t, p) in group.offsets]
        if records:
            error = self._write(group.group_id, records)
            if error is not ErrorCode.none:
                return error
        group.remove_offsets(partitions)
        if records and self._abandoned(group):
            return self.delete_group(group)
        return ErrorCode.none

    def delete_partitions(self, partitions: Collection[TopicPartition]) -> int:
        """The partitions' topic was deleted: every group loses its offsets of them, committed
        (tombstoned, so a replay does not bring them back) and pending, so a topic re-created
        under the same name starts with no committed offset (Kafka's
        GroupCoordinator.onPartitionsDeleted). An Empty group left with none is deleted. A
        pending transactional offset is dropped in memory only, as in Kafka: if its
        transaction's commit marker is replayed later, the offset comes back. Returns the
        number of committed offsets removed."""
        deleted = set(partitions)
        removed = 0
        for group in list(self.groups.values()):
            hit = [tp for tp in group.offsets if tp in deleted]
            pending = [tp for tp in deleted if group.has_pending_txn_offset(tp)]
            if not hit and not pending:
                continue
            if self.delete_offsets(group, hit + pending) is ErrorCode.none:
                removed += len(hit)
        return removed

    @staticmethod
    def _abandoned(group: GroupMetadata) -> bool:
        return group.is_state(GroupState.EMPTY) and not group.offsets \
            and not group.pending_members and not group.pending_txn_offsets

    def delete_group(self, group: GroupMetadata) -> ErrorCode:
        """Tombstone the group and all its offsets, then forget it (DeleteGroups, expiry)."""
        records: list[KeyValue] = [(encode_offset_key(group.group_id, t, p), None)
                                   for t, p in group.offsets]
        records.append((encode_group_key(group.group_id), None))
        error = self._write(group.group_id, records)
        if error is not ErrorCode.none:
            return error
        group.transition_to(GroupState.DEAD, self.now_ms())
        self.groups.pop(group.group_id, None)
        return ErrorCode.none

    def expire_offsets(self, retention_ms: int) -> int:
        """offsets.retention.minutes: drop expired offsets; an Empty group left with none dies."""
        now = self.now_ms()
        removed = 0
        for group in list(self.groups.values()):
            if self.partition_for(group.group_id) in self.loading:
                continue
            expired = group.expired_offsets(now, retention_ms)
            if expired and self.delete_offsets(group, expired) is ErrorCode.none:
                removed += len(expired)
            if group.group_id in self.groups and self._abandoned(group):
                self.delete_group(group)
        if removed:
            log.info("Removed %d expired offset(s)", removed)
        return removed


def _committed(value: OffsetValue) -> CommittedOffset:
    return CommittedOffset(value.offset, value.leader_epoch, value.metadata,
                           value.commit_timestamp, value.expire_timestamp)
