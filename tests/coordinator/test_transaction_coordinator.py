"""The transaction coordinator against an in-memory `__transaction_state`: the order of a
transaction's writes, the answers while it completes, fencing, timeouts and a reload.

The markers are written by a `MarkerWriter` the test holds: each call records what it was
asked and returns only when the test releases it, so the window between PrepareCommit and
CompleteCommit is observable without timing. Runs on the virtual clock (tests/virtual_time.py).
"""

from __future__ import annotations

import asyncio
import itertools

from harness.wire.errors import ErrorCode
from harness.wire.txn_records import decode_txn_key, decode_txn_value
from reference_broker.coordinator.common import LoggedRecord, partition_for
from reference_broker.coordinator.transaction.transaction_coordinator import (
    TransactionConfig,
    TransactionCoordinator,
)
from reference_broker.coordinator.transaction.transaction_metadata import TransactionState
from reference_broker.coordinator.transaction.transaction_state_manager import (
    TransactionStateManager,
)
from tests.virtual_time import clock_ms, run, settle

PARTITIONS = 3
OFFSETS_PARTITIONS = 50
S = TransactionState


class TxnLog:
    """`__transaction_state` in memory: appends land at once unless `fail_with` is set."""

    def __init__(self):
        self.partitions = {p: [] for p in range(PARTITIONS)}
        self.fail_with = ErrorCode.none

    async def append(self, partition, records):
        if self.fail_with is not ErrorCode.none:
            return self.fail_with
        self.partitions[partition].extend(LoggedRecord(k, v) for k, v in records)
        return ErrorCode.none

    def read(self, partition):
        return iter(list(self.partitions[partition]))

    def states(self, transactional_id):
        """The states written for the id, in order."""
        records = self.partitions[partition_for(transactional_id, PARTITIONS)]
        return [S(decode_txn_value(r.value).state) for r in records
                if decode_txn_key(r.key) == transactional_id]


class HeldMarkers:
    """Records each marker request; a request returns once `release()` is called."""

    def __init__(self):
        self.requests = []
        self._released = asyncio.Event()

    async def write_markers(self, transactional_id, producer_id, producer_epoch, commit,
                            partitions):
        self.requests.append((producer_id, producer_epoch, commit, partitions))
        await self._released.wait()

    def release(self):
        self._released.set()


async def started(log, markers, ids=None):
    ids = ids if ids is not None else itertools.count(1000)
    manager = TransactionStateManager(PARTITIONS, log.append, log.read, now_ms=clock_ms)
    coordinator = TransactionCoordinator(
        manager, TransactionConfig(max_timeout_ms=60_000), lambda: next(ids),
        lambda group: partition_for(group, OFFSETS_PARTITIONS), markers)
    for p in range(PARTITIONS):
        await coordinator.on_elected(p)
    return coordinator


def test_a_commit_is_prepared_answered_marked_then_completed():
    async def scenario():
        log, markers = TxnLog(), HeldMarkers()
        coordinator = await started(log, markers)
        init = await coordinator.init_producer_id("t", 10_000)
        assert (init.error, init.producer_id, init.producer_epoch) == (ErrorCode.none, 1000, 0)
        pid = init.producer_id
        assert await coordinator.add_partitions("t", pid, 0, [("a", 0)]) is ErrorCode.none
        assert await coordinator.add_offsets("t", pid, 0, "my-group") is ErrorCode.none
        meta = coordinator.manager.transactions["t"]
        assert meta.partitions == {("a", 0), ("__consumer_offsets", 12)}
        assert await coordinator.end_transaction("t", pid, 0, True) is ErrorCode.none
        assert meta.state is S.PREPARE_COMMIT
        await settle(lambda: markers.requests != [], "the markers to be sent")
        assert markers.requests == [(pid, 0, True, meta.partitions)]
        # While the markers are out, the id is busy: clients retry.
        assert (await coordinator.init_producer_id("t", 10_000)).error is \
            ErrorCode.concurrent_transactions
        assert await coordinator.add_partitions("t", pid, 0, [("a", 1)]) is \
            ErrorCode.concurrent_transactions
        assert await coordinator.end_transaction("t", pid, 0, True) is \
            ErrorCode.concurrent_transactions
        assert await coordinator.end_transaction("t", pid, 0, False) is \
            ErrorCode.invalid_txn_state
        markers.release()
        await settle(lambda: meta.state is S.COMPLETE_COMMIT, "CompleteCommit")
        assert meta.partitions == frozenset()
        assert log.states("t") == [S.EMPTY, S.ONGOING, S.ONGOING, S.PREPARE_COMMIT,
                                   S.COMPLETE_COMMIT]
        assert await coordinator.end_transaction("t", pid, 0, True) is ErrorCode.none
        again = await coordinator.init_producer_id("t", 10_000)
        assert (again.producer_id, again.producer_epoch) == (pid, 1)

    run(scenario())


def test_unknown_ids_wrong_producer_ids_and_epochs():
    async def scenario():
        coordinator = await started(TxnLog(), HeldMarkers())
        init = await coordinator.init_producer_id("t", 10_000)
        pid = init.producer_id
        assert await coordinator.add_partitions("never", pid, 0, [("a", 0)]) is \
            ErrorCode.invalid_producer_id_mapping
        assert await coordinator.end_transaction("t", pid + 1, 0, True) is \
            ErrorCode.invalid_producer_id_mapping
        assert await coordinator.add_offsets("t", pid, 5, "g") is ErrorCode.producer_fenced
        assert await coordinator.end_transaction("t", pid, 0, True) is \
            ErrorCode.invalid_txn_state
        assert (await coordinator.init_producer_id("t", 0)).error is \
            ErrorCode.invalid_transaction_timeout
        assert (await coordinator.init_producer_id("t", 60_001)).error is \
            ErrorCode.invalid_transaction_timeout
        assert (await coordinator.init_producer_id("", 1000)).error is ErrorCode.invalid_request

    run(scenario())


def test_init_on_an_open_transaction_fences_and_aborts_it():
    async def scenario():
        log, markers = TxnLog(), HeldMarkers()
        coordinator = await started(log, markers)
        pid = (await coordinator.init_producer_id("t", 10_000)).producer_id
        assert await coordinator.add_partitions("t", pid, 0, [("a", 0)]) is ErrorCode.none
        fenced = await coordinator.init_producer_id("t", 10_000)
        assert fenced.error is ErrorCode.concurrent_transactions
        await settle(lambda: markers.requests != [], "the abort markers")
        assert markers.requests == [(pid, 1, False, frozenset({("a", 0)}))]
        assert await coordinator.add_partitions("t", pid, 0, [("a", 0)]) is \
            ErrorCode.producer_fenced
        markers.release()
        meta = coordinator.manager.transactions["t"]
        await settle(lambda: meta.state is S.COMPLETE_ABORT, "CompleteAbort")
        again = await coordinator.init_producer_id("t", 10_000)
        assert (again.error, again.producer_id, again.producer_epoch) == (ErrorCode.none, pid, 2)
        assert log.states("t")[-3:] == [S.PREPARE_ABORT, S.COMPLETE_ABORT, S.EMPTY]

    run(scenario())


def test_a_timed_out_transaction_is_aborted_with_a_bumped_epoch():
    async def scenario():
        log, markers = TxnLog(), HeldMarkers()
        markers.release()
        coordinator = await started(log, markers)
        pid = (await coordinator.init_producer_id("t", 1_000)).producer_id
        assert await coordinator.add_partitions("t", pid, 0, [("a", 0)]) is ErrorCode.none
        assert coordinator.abort_timed_out(clock_ms()) == 0
        await asyncio.sleep(1.001)
        assert coordinator.abort_timed_out(clock_ms()) == 1
        meta = coordinator.manager.transactions["t"]
        await settle(lambda: meta.state is S.COMPLETE_ABORT, "CompleteAbort")
        assert meta.producer_epoch == 1 and markers.requests == [
            (pid, 1, False, frozenset({("a", 0)}))]
        assert await coordinator.end_transaction("t", pid, 0, True) is ErrorCode.producer_fenced

    run(scenario())


def test_a_failed_write_changes_nothing():
    async def scenario():
        log = TxnLog()
        coordinator = await started(log, HeldMarkers())
        pid = (await coordinator.init_producer_id("t", 10_000)).producer_id
        log.fail_with = ErrorCode.not_enough_replicas
        assert await coordinator.add_partitions("t", pid, 0, [("a", 0)]) is \
            ErrorCode.coordinator_not_available
        meta = coordinator.manager.transactions["t"]
        assert (meta.state, meta.partitions, meta.pending) == (S.EMPTY, frozenset(), None)

    run(scenario())


def test_a_new_coordinator_finishes_a_prepared_commit_and_refuses_while_loading():
    async def scenario():
        log, markers = TxnLog(), HeldMarkers()
        first = await started(log, markers)
        pid = (await first.init_producer_id("t", 10_000)).producer_id
        await first.add_partitions("t", pid, 0, [("a", 0), ("b", 2)])
        await first.end_transaction("t", pid, 0, True)
        partition = partition_for("t", PARTITIONS)
        first.on_resigned(partition)
        assert (await first.init_producer_id("t", 10_000)).error is ErrorCode.not_coordinator

        later = HeldMarkers()
        manager = TransactionStateManager(PARTITIONS, log.append, log.read, now_ms=clock_ms)
        second = TransactionCoordinator(manager, TransactionConfig(), lambda: 5000,
                                        lambda g: 0, later)
        # Enough records that the replay yields to the loop (it does every 256).
        log.partitions[partition][:0] = [log.partitions[partition][0]] * 600
        loading = asyncio.ensure_future(second.on_elected(partition))
        await settle(lambda: partition in manager.loading, "the load to begin")
        assert manager.ownership_error("t") is ErrorCode.coordinator_load_in_progress
        assert (await second.init_producer_id("t", 1000)).error is \
            ErrorCode.coordinator_load_in_progress
        await loading
        assert manager.ownership_error("t") is ErrorCode.none
        meta = manager.transactions["t"]
        assert (meta.state, meta.producer_id, meta.producer_epoch) == (S.PREPARE_COMMIT, pid, 0)
        await settle(lambda: later.requests != [], "the markers sent again")
        assert later.requests == [(pid, 0, True, frozenset({("a", 0), ("b", 2)}))]
        later.release()
        await settle(lambda: meta.state is S.COMPLETE_COMMIT, "CompleteCommit")
        _, listed = second.list_transactions(frozenset({S.COMPLETE_COMMIT}), None)
        assert [m.transactional_id for m in listed] == ["t"]
        _, none = second.list_transactions(None, frozenset({pid + 1}))
        assert none == []
        assert second.describe("t") == (ErrorCode.none, meta)
        unknown = next(f"x{i}" for i in itertools.count()
                       if partition_for(f"x{i}", PARTITIONS) == partition)
        assert second.describe(unknown)[0] is ErrorCode.transactional_id_not_found

    run(scenario())


def test_verify_only_answers_per_partition_and_adds_nothing():
    async def scenario():
        coordinator = await started(TxnLog(), HeldMarkers())
        pid = (await coordinator.init_producer_id("t", 10_000)).producer_id
        assert coordinator.verify_partitions("t", pid, 0, [("a", 0)],
                                             ErrorCode.transaction_abortable) == (
            ErrorCode.none, {("a", 0): ErrorCode.transaction_abortable})
        await coordinator.add_partitions("t", pid, 0, [("a", 0)])
        assert coordinator.verify_partitions("t", pid, 0, [("a", 0), ("a", 1)],
                                             ErrorCode.invalid_txn_state) == (
            ErrorCode.none, {("a", 0): ErrorCode.none, ("a", 1): ErrorCode.invalid_txn_state})
        assert coordinator.verify_partitions("t", pid, 3, [("a", 0)],
                                             ErrorCode.invalid_txn_state)[0] is \
            ErrorCode.producer_fenced
        assert coordinator.manager.transactions["t"].partitions == {("a", 0)}

    run(scenario())
