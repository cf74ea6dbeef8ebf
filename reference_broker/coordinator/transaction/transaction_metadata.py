"""One transactional id's state, as Kafka's TransactionMetadata: producer id and epochs, the
transaction's partitions and where it stands.

Sans-IO, as the group state machine (`coordinator/group/group_metadata.py`): the coordinator
decides *when* a change is written to `__transaction_state`, this module decides *whether* it is
legal and *what* it becomes. Every change goes in two steps, as in Kafka: `prepare` computes the
next state as a frozen `TxnTransit` (the value the coordinator appends to the log) and marks it
pending; `complete` applies it once the append succeeded, `abandon` drops it when it failed.
While a change is pending every other request is told CONCURRENT_TRANSACTIONS.

The states, and why each may follow the ones listed in `VALID_PREVIOUS_STATES`:

- **Empty** — a producer id and epoch, no transaction. InitProducerId again stays Empty (with a
  bumped epoch), as does the first InitProducerId after a completed transaction.
- **Ongoing** — partitions were added; more may be. Entered from Empty or a completed
  transaction by the first AddPartitionsToTxn/AddOffsetsToTxn.
- **PrepareCommit / PrepareAbort** — EndTxn was accepted and written; markers are being sent.
  PrepareAbort also follows PrepareEpochFence (the coordinator aborting on its own).
- **CompleteCommit / CompleteAbort** — every marker written; the next transaction may begin.
- **PrepareEpochFence** — the coordinator bumped the epoch of an Ongoing transaction to fence
  its producer (a new InitProducerId, or the transaction timed out) before aborting it.
- **Dead** — the id expired (transactional.id.expiration.ms); nothing follows.

Any other change is a coordinator bug, so `prepare` raises `InvalidStateTransition`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from enum import IntEnum
from typing import Any

from harness.wire.errors import ErrorCode

MAX_EPOCH = 32767  # Short.MaxValue: an epoch is an int16
NO_PRODUCER_ID = -1
NO_EPOCH = -1

TopicPartition = tuple[str, int]


class TransactionState(IntEnum):
    """The value is the state byte TransactionLogValue stores (Kafka's TransactionState.id)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use ("PrepareCommit", ...)."""
        return _DISPLAY_NAMES[self]

    @classmethod
    def from_display_name(cls, name: str) -> TransactionState | None:
        return _BY_DISPLAY_NAME.get(name)


_DISPLAY_NAMES: dict[TransactionState, str] = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_DISPLAY_NAME = {name: state for state, name in _DISPLAY_NAMES.items()}

_S = TransactionState
_COMPLETED = frozenset({_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
# For each state, the states it may be entered from (Kafka's validPreviousStates).
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, *_COMPLETED}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, *_COMPLETED}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, *_COMPLETED}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


class InvalidStateTransition(RuntimeError):
    """The coordinator asked for a change the state machine forbids: a bug, never input."""


@dataclass(frozen=True)
class TxnTransit:
    """A whole state of one transactional id: what a TransactionLogValue holds (plus the
    last epoch, which Kafka keeps in memory only) and what a pending change will make it."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    txn_start_ms: int
    last_update_ms: int


@dataclass(frozen=True)
class InitDecision:
    """What InitProducerId does: answer `error` at once (nothing to write), write `transit`
    and answer with its producer id and epoch, or — `fence` — fence the ongoing transaction
    (`prepare_fence`), abort it and answer CONCURRENT_TRANSACTIONS so the client retries
    once the abort completes."""

    error: ErrorCode
    transit: TxnTransit | None = None
    fence: bool = False


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int = NO_PRODUCER_ID
    last_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_EPOCH
    last_producer_epoch: int = NO_EPOCH
    timeout_ms: int = 60000
    state: TransactionState = TransactionState.EMPTY
    partitions: frozenset[TopicPartition] = frozenset()
    txn_start_ms: int = -1
    last_update_ms: int = -1
    pending: TxnTransit | None = field(default=None, compare=False)

    # --- the two-step change -----------------------------------------------------------------

    def snapshot(self) -> TxnTransit:
        return TxnTransit(**{f.name: getattr(self, f.name) for f in fields(TxnTransit)})

    def prepare(self, state: TransactionState, now_ms: int, **changes: Any) -> TxnTransit:
        """The next state, marked pending; raises on an illegal or overlapping change."""
        if self.pending is not None:
            raise InvalidStateTransition(
                f"transactional id {self.transactional_id!r} already changes to "
                f"{self.pending.state.display_name}")
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise InvalidStateTransition(
                f"transactional id {self.transactional_id!r} cannot go from "
                f"{self.state.display_name} to {state.display_name}")
        transit = replace(self.snapshot(), state=state, last_update_ms=now_ms, **changes)
        self.pending = transit
        return transit

    def complete(self, transit: TxnTransit) -> None:
        """The pending change was written: it becomes the state."""
        if self.pending is not transit:
            raise InvalidStateTransition(
                f"transactional id {self.transactional_id!r}: completing a change that is "
                f"not the pending one")
        self.restore(transit)

    def abandon(self) -> None:
        """The pending change could not be written: the state stays as it was."""
        self.pending = None

    @classmethod
    def loaded(cls, transactional_id: str, state: TxnTransit) -> TransactionMetadata:
        """The metadata a replay of `__transaction_state` ends with."""
        meta = cls(transactional_id)
        meta.restore(state)
        return meta

    # --- questions ---------------------------------------------------------------------------

    @property
    def epoch_exhausted(self) -> bool:
        """One epoch is kept in reserve for fencing, as Kafka does (Short.MaxValue - 1)."""
        return self.producer_epoch >= MAX_EPOCH - 1

    def is_completing(self) -> bool:
        return self.pending is not None or self.state in (
            _S.PREPARE_COMMIT, _S.PREPARE_ABORT, _S.PREPARE_EPOCH_FENCE)

    def has_expired(self, now_ms: int) -> bool:
        """An Ongoing transaction older than its timeout, which the coordinator aborts."""
        return self.state is _S.ONGOING and self.pending is None \
            and self.txn_start_ms + self.timeout_ms < now_ms

    def _plausible_expected(self, producer_id: int, epoch: int) -> bool:
        """KIP-360: a producer naming its id and epoch is one of ours unless the id is neither
        the current one nor — after a rotation it may not have heard of — the previous."""
        if self.producer_epoch == NO_EPOCH or producer_id == self.producer_id:
            return True
        return producer_id == self.last_producer_id and epoch == self.last_producer_epoch

    # --- InitProducerId ----------------------------------------------------------------------

    def init_producer_id(self, timeout_ms: int, now_ms: int, new_producer_id: int,
                         expected: tuple[int, int] | None = None) -> InitDecision:
        """KIP-98's epoch bump, KIP-360's recovery (`expected` = the producer's id and epoch)
        and the rotation to `new_producer_id` once the epoch is exhausted."""
        if self.is_completing():
            return InitDecision(ErrorCode.concurrent_transactions)
        if expected is not None and not self._plausible_expected(*expected):
            return InitDecision(ErrorCode.producer_fenced)
        if self.state is _S.ONGOING:
            return InitDecision(ErrorCode.concurrent_transactions, fence=True)
        if self.state is _S.DEAD:
            raise InvalidStateTransition(f"InitProducerId on dead {self.transactional_id!r}")
        base: dict[str, Any] = {"timeout_ms": timeout_ms, "partitions": frozenset(),
                                "txn_start_ms": -1}
        if self.epoch_exhausted and (expected is None or expected[1] == self.producer_epoch):
            return InitDecision(ErrorCode.none, self.prepare(
                _S.EMPTY, now_ms, producer_id=new_producer_id,
                last_producer_id=self.producer_id, producer_epoch=0,
                last_producer_epoch=self.producer_epoch if expected is not None else NO_EPOCH,
                **base))
        if expected is None or expected[1] in (NO_EPOCH, self.producer_epoch):
            return InitDecision(ErrorCode.none, self.prepare(
                _S.EMPTY, now_ms, producer_epoch=self.producer_epoch + 1,
                last_producer_epoch=self.producer_epoch, **base))
        if expected[1] == self.last_producer_epoch:
            # A retry whose answer was lost: the bump already happened, hand it out again.
            return InitDecision(ErrorCode.none, self.prepare(_S.EMPTY, now_ms, **base))
        return InitDecision(ErrorCode.producer_fenced)

    def prepare_fence(self, now_ms: int) -> TxnTransit:
        """Bump the epoch of an Ongoing transaction so its producer is fenced before the
        coordinator aborts it (an epoch already at the maximum stays: nothing is above it)."""
        epoch = self.producer_epoch if self.producer_epoch >= MAX_EPOCH else \
            self.producer_epoch + 1
        return self.prepare(_S.PREPARE_EPOCH_FENCE, now_ms, producer_epoch=epoch,
                            last_producer_epoch=self.producer_epoch)

    # --- the client's requests about the transaction -----------------------------------------

    def check_producer(self, producer_id: int, epoch: int) -> ErrorCode:
        """The checks every AddPartitionsToTxn, AddOffsetsToTxn and EndTxn begins with."""
        if producer_id != self.producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if epoch != self.producer_epoch:
            return ErrorCode.producer_fenced
        if self.is_completing():
            return ErrorCode.concurrent_transactions
        return ErrorCode.none

    def add_partitions(self, partitions: frozenset[TopicPartition],
                       now_ms: int) -> TxnTransit | None:
        """Ongoing with `partitions` added; None when they all are already (nothing to write).
        The transaction's clock starts at its first partition."""
        if self.state is _S.ONGOING and partitions <= self.partitions:
            return None
        start = self.txn_start_ms if self.state is _S.ONGOING else now_ms
        return self.prepare(_S.ONGOING, now_ms, partitions=self.partitions | partitions,
                            txn_start_ms=start)

    def end_transaction(self, producer_id: int, epoch: int, commit: bool,
                        now_ms: int) -> ErrorCode | TxnTransit:
        """EndTxn: PrepareCommit/PrepareAbort to write, or the answer. A retried EndTxn whose
        outcome is being completed is CONCURRENT_TRANSACTIONS, one already complete NONE; the
        other outcome than the one under way is INVALID_TXN_STATE."""
        error = self.check_producer(producer_id, epoch)
        prepared = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
        if error is ErrorCode.concurrent_transactions and self.pending is None \
                and self.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT) \
                and self.state is not prepared:
            return ErrorCode.invalid_txn_state
        if error is not ErrorCode.none:
            return error
        if self.state is _S.ONGOING:
            return self.prepare(prepared, now_ms)
        done = _S.COMPLETE_COMMIT if commit else _S.COMPLETE_ABORT
        if self.state is done:
            return ErrorCode.none
        return ErrorCode.invalid_txn_state

    def restore(self, state: TxnTransit) -> None:
        """Back to `state` with nothing pending: the coordinator's own fence-and-abort could
        not be written, so the producer keeps the epoch it had."""
        for f in fields(TxnTransit):
            setattr(self, f.name, getattr(state, f.name))
        self.pending = None

    def prepare_abort_after_fence(self, now_ms: int) -> TxnTransit:
        """The coordinator's own abort (after a fence or a timeout)."""
        return self.prepare(_S.PREPARE_ABORT, now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        """Every marker is written: CompleteCommit or CompleteAbort, with no partitions."""
        target = _S.COMPLETE_COMMIT if self.state is _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
        return self.prepare(target, now_ms, partitions=frozenset())
