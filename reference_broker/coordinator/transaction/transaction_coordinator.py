"""The transaction coordinator (Kafka's TransactionCoordinator): InitProducerId with a
transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, and the coordinator's own
aborts of fenced and timed-out transactions.

Every request runs the same way: ownership (NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS
from the state manager), then the id's `TransactionMetadata` decides (sans-IO), then the
decided change is written to `__transaction_state` and applied once the ISR holds it, and only
then answered. An EndTxn is answered once PrepareCommit/PrepareAbort is written; the markers
are written to every partition's leader afterwards (`MarkerWriter`), and CompleteCommit or
CompleteAbort is written when they all are. Until then the id answers CONCURRENT_TRANSACTIONS,
which clients retry. A new coordinator that loads a partition with a transaction caught in
PrepareCommit/PrepareAbort sends its markers again and completes it (markers are idempotent).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from harness.wire.errors import ErrorCode, error_name
from reference_broker.coordinator.transaction.transaction_metadata import (
    NO_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TxnTransit,
)
from reference_broker.coordinator.transaction.transaction_state_manager import (
    TransactionStateManager,
)

log = logging.getLogger("reference_broker.coordinator.transaction")

OFFSETS_TOPIC = "__consumer_offsets"
_COMPLETE_RETRY_S = 0.1  # pause before writing CompleteCommit/CompleteAbort again


class MarkerWriter(Protocol):
    """Writes a transaction's markers (Kafka's TransactionMarkerChannelManager)."""

    async def write_markers(self, transactional_id: str, producer_id: int, producer_epoch: int,
                            commit: bool, partitions: frozenset[TopicPartition]) -> None:
        """Return once every partition's leader wrote the marker (or the partition is gone);
        retries on its own meanwhile."""
        ...


@dataclass(frozen=True)
class TransactionConfig:
    """The broker's transaction.* settings the coordinator obeys."""

    max_timeout_ms: int = 900000


@dataclass(frozen=True)
class InitResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_EPOCH


class TransactionCoordinator:
    def __init__(self, manager: TransactionStateManager, config: TransactionConfig,
                 next_producer_id: Callable[[], int], offsets_partition_for: Callable[[str], int],
                 markers: MarkerWriter) -> None:
        self.manager = manager
        self.config = config
        self._next_producer_id = next_producer_id
        self._offsets_partition_for = offsets_partition_for
        self._markers = markers
        self._completions: dict[str, asyncio.Task[None]] = {}

    # --- ownership ---------------------------------------------------------------------------

    async def on_elected(self, partition: int) -> None:
        """This broker leads a `__transaction_state` partition: load it, then finish the
        transactions it left half-way."""
        for meta in await self.manager.load_partition(partition):
            self._complete_after_markers(meta)

    def on_resigned(self, partition: int) -> None:
        for meta in self.manager.unload_partition(partition):
            task = self._completions.pop(meta.transactional_id, None)
            if task is not None:
                task.cancel()

    def _lookup(self, transactional_id: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        if not transactional_id:
            return ErrorCode.invalid_request, None
        error = self.manager.ownership_error(transactional_id)
        if error is not ErrorCode.none:
            return error, None
        meta = self.manager.transactions.get(transactional_id)
        if meta is None:
            return ErrorCode.invalid_producer_id_mapping, None
        return ErrorCode.none, meta

    # --- InitProducerId ----------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None = None) -> InitResult:
        if not transactional_id:
            return InitResult(ErrorCode.invalid_request)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return InitResult(ErrorCode.invalid_transaction_timeout)
        error = self.manager.ownership_error(transactional_id)
        if error is not ErrorCode.none:
            return InitResult(error)
        meta = self.manager.transactions.get(transactional_id)
        if meta is None:
            meta = TransactionMetadata(transactional_id, producer_id=self._next_producer_id(),
                                       timeout_ms=timeout_ms)
            self.manager.transactions[transactional_id] = meta
        now = self.manager.now_ms()
        new_id = self._next_producer_id() if meta.epoch_exhausted else NO_PRODUCER_ID
        decision = meta.init_producer_id(timeout_ms, now, new_id, expected)
        if decision.fence:
            # The client retries CONCURRENT_TRANSACTIONS until the abort completed.
            self._spawn(transactional_id, self._abort_started(meta, self._fence(meta)))
            return InitResult(decision.error)
        if decision.transit is None:
            return InitResult(decision.error)
        error = await self.manager.write(meta, decision.transit)
        if error is not ErrorCode.none:
            return InitResult(error)
        return InitResult(ErrorCode.none, meta.producer_id, meta.producer_epoch)

    # --- the transaction's partitions --------------------------------------------------------

    async def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                             partitions: Iterable[TopicPartition]) -> ErrorCode:
        error, meta = self._lookup(transactional_id)
        if meta is None:
            return error
        error = meta.check_producer(producer_id, epoch)
        if error is not ErrorCode.none:
            return error
        transit = meta.add_partitions(frozenset(partitions), self.manager.now_ms())
        if transit is None:
            return ErrorCode.none
        return await self.manager.write(meta, transit)

    async def add_offsets(self, transactional_id: str, producer_id: int, epoch: int,
                          group_id: str) -> ErrorCode:
        """KIP-98: the group's `__consumer_offsets` partition joins the transaction, so the
        markers reach the group coordinator, which then makes the offsets visible."""
        partition = (OFFSETS_TOPIC, self._offsets_partition_for(group_id))
        return await self.add_partitions(transactional_id, producer_id, epoch, [partition])

    def verify_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                          partitions: Iterable[TopicPartition],
                          not_added: ErrorCode) -> tuple[ErrorCode, dict[TopicPartition,
                                                                         ErrorCode]]:
        """KIP-890's verification (AddPartitionsToTxn v4 verify_only): whether each partition
        is in the ongoing transaction — NONE, or `not_added` — adding nothing. The first
        element is the error for the whole transaction, if any."""
        error, meta = self._lookup(transactional_id)
        if meta is None:
            return error, {}
        error = meta.check_producer(producer_id, epoch)
        if error is not ErrorCode.none:
            return error, {}
        ongoing = meta.state is TransactionState.ONGOING
        return ErrorCode.none, {tp: ErrorCode.none if ongoing and tp in meta.partitions
                                else not_added for tp in partitions}

    # --- EndTxn and completion ---------------------------------------------------------------

    async def end_transaction(self, transactional_id: str, producer_id: int, epoch: int,
                              commit: bool) -> ErrorCode:
        error, meta = self._lookup(transactional_id)
        if meta is None:
            return error
        outcome = meta.end_transaction(producer_id, epoch, commit, self.manager.now_ms())
        if isinstance(outcome, ErrorCode):
            return outcome
        error = await self.manager.write(meta, outcome)
        if error is ErrorCode.none:
            self._complete_after_markers(meta)
        return error

    def _fence(self, meta: TransactionMetadata) -> TxnTransit:
        """Kafka's fencing abort, first half: the epoch is bumped in memory (PrepareEpochFence
        is never logged) and PrepareAbort prepared at the bumped epoch. Returns the state to
        go back to if PrepareAbort cannot be written."""
        before = meta.snapshot()
        now = self.manager.now_ms()
        meta.complete(meta.prepare_fence(now))
        meta.prepare_abort_after_fence(now)
        return before

    async def _abort_started(self, meta: TransactionMetadata, before: TxnTransit) -> None:
        """Second half: write PrepareAbort, then the markers and CompleteAbort. If the write
        fails, the transaction stays Ongoing at its old epoch."""
        transit = meta.pending
        assert transit is not None
        error = await self.manager.write(meta, transit)
        if error is not ErrorCode.none:
            log.warning("Could not abort the transaction of %s: %s", meta.transactional_id,
                        error_name(error))
            if meta.state is TransactionState.PREPARE_EPOCH_FENCE:
                meta.restore(before)
            return
        await self._complete(meta)

    def _complete_after_markers(self, meta: TransactionMetadata) -> None:
        self._spawn(meta.transactional_id, self._complete(meta))

    def _spawn(self, transactional_id: str, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` for the id in the background, kept until done (cancelled on
        resignation); at most one per id, the newest."""
        task = asyncio.get_running_loop().create_task(work, name=f"txn-{transactional_id}")
        self._completions[transactional_id] = task
        task.add_done_callback(functools.partial(self._completed, transactional_id))

    def _completed(self, transactional_id: str, task: asyncio.Task[None]) -> None:
        if self._completions.get(transactional_id) is task:
            del self._completions[transactional_id]
        if not task.cancelled() and task.exception() is not None:
            log.error("Completing the transaction of %s failed", transactional_id,
                      exc_info=task.exception())

    async def _complete(self, meta: TransactionMetadata) -> None:
        commit = meta.state is TransactionState.PREPARE_COMMIT
        await self._markers.write_markers(meta.transactional_id, meta.producer_id,
                                          meta.producer_epoch, commit, meta.partitions)
        while self.manager.transactions.get(meta.transactional_id) is meta:
            error = await self.manager.write(meta, meta.prepare_complete(self.manager.now_ms()))
            if error is ErrorCode.none:
                log.debug("Transaction of %s completed (%s)", meta.transactional_id,
                          meta.state.display_name)
                return
            if error is ErrorCode.not_coordinator:
                return  # the new coordinator loads PrepareCommit/PrepareAbort and finishes
            await asyncio.sleep(_COMPLETE_RETRY_S)

    # --- the coordinator's own aborts --------------------------------------------------------

    def abort_timed_out(self, now_ms: int) -> int:
        """transaction.abort.timed.out.transaction.cleanup.interval.ms: fence and abort every
        Ongoing transaction past its timeout; the number started."""
        expired = self.manager.timed_out(now_ms)
        for meta in expired:
            log.info("Aborting the transaction of %s (producer %d, epoch %d): timed out after "
                     "%d ms", meta.transactional_id, meta.producer_id, meta.producer_epoch,
                     meta.timeout_ms)
            # The fence happens now, synchronously, so no request slips in before it.
            self._spawn(meta.transactional_id, self._abort_started(meta, self._fence(meta)))
        return len(expired)

    # --- DescribeTransactions, ListTransactions ----------------------------------------------

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        if not transactional_id:
            return ErrorCode.transactional_id_not_found, None
        error = self.manager.ownership_error(transactional_id)
        if error is not ErrorCode.none:
            return error, None
        meta = self.manager.transactions.get(transactional_id)
        if meta is None or meta.state is TransactionState.DEAD:
            return ErrorCode.transactional_id_not_found, None
        return ErrorCode.none, meta

    def list_transactions(self, states: frozenset[TransactionState] | None,
                          producer_ids: frozenset[int] | None, min_duration_ms: int = -1
                          ) -> tuple[ErrorCode, list[TransactionMetadata]]:
        """The ids this coordinator holds, filtered as KIP-664 (and KIP-994's duration)
        says; COORDINATOR_LOAD_IN_PROGRESS while a partition loads, as Kafka answers."""
        now = self.manager.now_ms()
        error = ErrorCode.coordinator_load_in_progress if self.manager.loading \
            else ErrorCode.none
        listed = [m for m in self.manager.transactions.values()
                  if m.state is not TransactionState.DEAD
                  and (states is None or m.state in states)
                  and (producer_ids is None or m.producer_id in producer_ids)
                  and (min_duration_ms < 0 or (m.state is TransactionState.ONGOING
                                               and now - m.txn_start_ms >= min_duration_ms))]
        return error, listed

    async def shutdown(self) -> None:
        for task in list(self._completions.values()):
            task.cancel()
