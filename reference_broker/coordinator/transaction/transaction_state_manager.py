"""Transactional ids kept on `__transaction_state` (Kafka's TransactionStateManager).

As the group coordinator's memory is a cache of `__consumer_offsets`, the transaction
coordinator's is a cache of `__transaction_state`: every state change is appended there (in
Kafka's TransactionLog layout, `harness.wire.txn_records`) and only applied once the partition's
ISR holds it, and on becoming leader of a partition the cache is rebuilt by replaying it; until
then its ids answer COORDINATOR_LOAD_IN_PROGRESS, and NOT_COORDINATOR once the partition moved
away. A transactional id lives on partition abs(hashCode(id)) % partitions, as in Kafka.

The manager does not know how records reach the log: the server hands it an "append and wait
for the ISR" coroutine and a reader at start-up, so it never imports the server.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from harness.wire.errors import ErrorCode
from harness.wire.group_records import RecordFormatError
from harness.wire.txn_records import (
    TxnLogValue,
    decode_txn_key,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
    group_partitions,
)
from reference_broker.coordinator.common import (
    APPEND_ERRORS,
    CoordinatorPartitions,
    KeyValue,
    LoggedRecord,
    ReadPartition,
    replay,
    wall_clock_ms,
)
from reference_broker.coordinator.transaction.transaction_metadata import (
    NO_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TransactionState,
    TxnTransit,
)

log = logging.getLogger("reference_broker.coordinator.transaction")

AppendReplicated = Callable[[int, list[KeyValue]], Awaitable[ErrorCode]]
"""Append records to a `__transaction_state` partition and wait for its ISR; an error code."""


def log_value(transit: TxnTransit) -> TxnLogValue:
    """The TransactionLogValue of a state; an Empty one carries null partitions, as Kafka's."""
    partitions = None if transit.state is TransactionState.EMPTY \
        else group_partitions(transit.partitions)
    return TxnLogValue(transit.producer_id, transit.producer_epoch, transit.timeout_ms,
                       transit.state.value, partitions, transit.last_update_ms,
                       transit.txn_start_ms)


def from_log_value(value: TxnLogValue) -> TxnTransit:
    """The state a replayed value stands for (the last epoch is not logged, as in Kafka)."""
    partitions = frozenset((topic, p) for topic, ids in value.partitions or () for p in ids)
    return TxnTransit(value.producer_id, NO_PRODUCER_ID, value.producer_epoch, NO_EPOCH,
                      value.timeout_ms, TransactionState(value.state), partitions,
                      value.start_ms, value.last_update_ms)


class TransactionStateManager(CoordinatorPartitions):
    def __init__(self, num_partitions: int, append: AppendReplicated, read: ReadPartition,
                 *, now_ms: Callable[[], int] = wall_clock_ms) -> None:
        super().__init__(num_partitions)
        self._append = append
        self._read = read
        self.now_ms = now_ms
        self.transactions: dict[str, TransactionMetadata] = {}
        self._loader: asyncio.Lock | None = None  # one replay at a time; made on the loop

    # --- loading and unloading ---------------------------------------------------------------

    async def load_partition(self, partition: int) -> list[TransactionMetadata]:
        """Become coordinator of `partition`: its ids as the log ends. Returns those caught
        between PrepareCommit/PrepareAbort and their completion, whose markers the
        coordinator must (re)send, as Kafka's loader hands them back."""
        if partition in self.owned:
            return []
        self.owned.add(partition)
        self.loading.add(partition)
        if self._loader is None:
            self._loader = asyncio.Lock()
        try:
            async with self._loader:
                records = await replay(self._read, partition, self.owned)
            if records is None:
                return []
            loaded = _latest_states(records, partition)
            for transactional_id, state in loaded.items():
                self.transactions[transactional_id] = TransactionMetadata.loaded(
                    transactional_id, state)
        finally:
            self.loading.discard(partition)
        if loaded:
            log.info("Loaded %d transactional id(s) from __transaction_state-%d", len(loaded),
                     partition)
        return [self.transactions[t] for t, s in loaded.items()
                if s.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)]

    def unload_partition(self, partition: int) -> list[TransactionMetadata]:
        """Give up `partition` (its leadership moved): its ids leave the cache."""
        self.owned.discard(partition)
        self.loading.discard(partition)
        gone = [m for t, m in self.transactions.items() if self.partition_for(t) == partition]
        for meta in gone:
            del self.transactions[meta.transactional_id]
        return gone

    # --- writing -----------------------------------------------------------------------------

    async def write(self, meta: TransactionMetadata, transit: TxnTransit) -> ErrorCode:
        """Append the pending change and apply it once the ISR holds it, else drop it. A
        partition that moved away meanwhile is NOT_COORDINATOR even if the write landed: the
        new coordinator's replay decides then."""
        partition = self.partition_for(meta.transactional_id)
        error = await self._append(partition, [
            (encode_txn_key(meta.transactional_id), encode_txn_value(log_value(transit)))])
        error = APPEND_ERRORS.get(error, error)
        if error is ErrorCode.none and partition not in self.owned:
            error = ErrorCode.not_coordinator
        if error is ErrorCode.none and meta.pending is transit:
            meta.complete(transit)
        else:
            meta.abandon()
        return error

    def timed_out(self, now_ms: int) -> list[TransactionMetadata]:
        """Ongoing transactions past their timeout on partitions loaded here."""
        return [m for t, m in self.transactions.items()
                if self.partition_for(t) not in self.loading and m.has_expired(now_ms)]


def _latest_states(records: list[LoggedRecord], partition: int) -> dict[str, TxnTransit]:
    """The last state of each id (a tombstone removes it); unreadable records are skipped."""
    states: dict[str, TxnTransit] = {}
    for record in records:
        key, value = record.key, record.value
        if key is None:
            continue
        try:
            transactional_id = decode_txn_key(key)
            if value is None:
                states.pop(transactional_id, None)
            else:
                states[transactional_id] = from_log_value(decode_txn_value(value))
        except (RecordFormatError, ValueError) as exc:
            log.warning("Skipping unreadable record in __transaction_state-%d: %s", partition,
                        exc)
    return states
