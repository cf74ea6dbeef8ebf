"""The transaction state machine on its own: the transition table, InitProducerId's epoch rules
(KIP-98, KIP-360) and the checks AddPartitionsToTxn and EndTxn begin with."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.wire.errors import ErrorCode
from reference_broker.coordinator.transaction.transaction_metadata import (
    MAX_EPOCH,
    NO_EPOCH,
    VALID_PREVIOUS_STATES,
    InvalidStateTransition,
    TransactionMetadata,
    TransactionState,
)

S = TransactionState
ALLOWED = {
    (S.EMPTY, S.EMPTY), (S.COMPLETE_COMMIT, S.EMPTY), (S.COMPLETE_ABORT, S.EMPTY),
    (S.ONGOING, S.ONGOING), (S.EMPTY, S.ONGOING), (S.COMPLETE_COMMIT, S.ONGOING),
    (S.COMPLETE_ABORT, S.ONGOING), (S.ONGOING, S.PREPARE_COMMIT), (S.ONGOING, S.PREPARE_ABORT),
    (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT), (S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
    (S.PREPARE_ABORT, S.COMPLETE_ABORT), (S.EMPTY, S.DEAD), (S.COMPLETE_COMMIT, S.DEAD),
    (S.COMPLETE_ABORT, S.DEAD), (S.ONGOING, S.PREPARE_EPOCH_FENCE),
}


def meta_in(state: TransactionState, epoch: int = 3, producer_id: int = 7
            ) -> TransactionMetadata:
    return TransactionMetadata("t", producer_id=producer_id, producer_epoch=epoch, state=state)


def apply(meta: TransactionMetadata, transit):  # the coordinator's write succeeding
    meta.complete(transit)
    return meta


@pytest.mark.parametrize("source", list(S))
@pytest.mark.parametrize("target", list(S))
def test_only_documented_transitions_are_allowed(source, target):
    meta = meta_in(source)
    if (source, target) in ALLOWED:
        transit = meta.prepare(target, now_ms=5)
        assert meta.state is source and meta.pending is transit  # nothing applied yet
        meta.complete(transit)
        assert meta.state is target and meta.last_update_ms == 5 and meta.pending is None
    else:
        with pytest.raises(InvalidStateTransition):
            meta.prepare(target, now_ms=5)
        assert meta.state is source and meta.pending is None


def test_the_table_and_the_allowed_set_agree():
    assert {(p, s) for s, ps in VALID_PREVIOUS_STATES.items() for p in ps} == ALLOWED


def test_state_bytes_and_names_are_kafkas():
    assert [(s.value, s.display_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"),
        (4, "CompleteCommit"), (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    assert all(S.from_display_name(s.display_name) is s for s in S)


def test_a_second_change_while_one_is_pending_raises_and_abandon_keeps_the_state():
    meta = meta_in(S.EMPTY)
    meta.add_partitions(frozenset({("a", 0)}), 1)
    with pytest.raises(InvalidStateTransition):
        meta.prepare(S.ONGOING, 2)
    meta.abandon()
    assert meta.state is S.EMPTY and meta.partitions == frozenset()


def test_completing_a_change_that_is_not_pending_raises():
    meta = meta_in(S.EMPTY)
    other = meta_in(S.EMPTY).prepare(S.ONGOING, 1)
    with pytest.raises(InvalidStateTransition):
        meta.complete(other)


def test_the_first_init_gives_epoch_zero_and_the_next_bumps_it():
    meta = TransactionMetadata("t", producer_id=11)
    first = meta.init_producer_id(1000, 1, new_producer_id=99)
    assert first.error is ErrorCode.none and first.transit is not None
    apply(meta, first.transit)
    assert (meta.producer_id, meta.producer_epoch, meta.timeout_ms) == (11, 0, 1000)
    apply(meta, meta.init_producer_id(2000, 2, new_producer_id=99).transit)
    assert (meta.producer_id, meta.producer_epoch, meta.last_producer_epoch) == (11, 1, 0)


def test_init_on_an_ongoing_transaction_fences_then_aborts():
    meta = meta_in(S.EMPTY, epoch=4)
    apply(meta, meta.add_partitions(frozenset({("a", 0)}), 10))
    decision = meta.init_producer_id(1000, 20, new_producer_id=99)
    assert decision.error is ErrorCode.concurrent_transactions and decision.fence
    assert decision.transit is None and meta.pending is None
    apply(meta, meta.prepare_fence(20))
    assert (meta.state, meta.producer_epoch) == (S.PREPARE_EPOCH_FENCE, 5)
    assert meta.check_producer(7, 4) is ErrorCode.producer_fenced
    apply(meta, meta.prepare_abort_after_fence(21))
    assert meta.init_producer_id(1000, 22, 99).error is ErrorCode.concurrent_transactions
    apply(meta, meta.prepare_complete(23))
    assert (meta.state, meta.partitions) == (S.COMPLETE_ABORT, frozenset())
    apply(meta, meta.init_producer_id(1000, 24, 99).transit)
    assert (meta.state, meta.producer_epoch) == (S.EMPTY, 6)


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE])
def test_init_while_completing_is_concurrent_transactions(state):
    decision = meta_in(state).init_producer_id(1000, 1, 99)
    assert (decision.error, decision.transit) == (ErrorCode.concurrent_transactions, None)


def test_an_exhausted_epoch_rotates_to_a_new_producer_id():
    meta = meta_in(S.COMPLETE_COMMIT, epoch=MAX_EPOCH - 1)
    apply(meta, meta.init_producer_id(1000, 1, new_producer_id=99).transit)
    assert (meta.producer_id, meta.producer_epoch, meta.last_producer_id) == (99, 0, 7)


def test_kip_360_recovery_with_the_current_epoch_bumps():
    meta = meta_in(S.COMPLETE_ABORT, epoch=3)
    apply(meta, meta.init_producer_id(1000, 1, 99, expected=(7, 3)).transit)
    assert (meta.producer_id, meta.producer_epoch) == (7, 4)


def test_kip_360_retry_with_the_previous_epoch_answers_the_current_one():
    meta = meta_in(S.EMPTY, epoch=3)
    apply(meta, meta.init_producer_id(1000, 1, 99, expected=(7, 3)).transit)
    apply(meta, meta.init_producer_id(1000, 2, 99, expected=(7, 3)).transit)
    assert meta.producer_epoch == 4


def test_kip_360_with_a_stranger_id_or_an_old_epoch_is_fenced():
    meta = meta_in(S.EMPTY, epoch=5)
    assert meta.init_producer_id(1000, 1, 99, expected=(8, 5)).error is ErrorCode.producer_fenced
    assert meta.init_producer_id(1000, 1, 99, expected=(7, 1)).error is ErrorCode.producer_fenced
    assert meta.pending is None


def test_kip_360_after_a_rotation_the_previous_id_at_its_last_epoch_is_recognised():
    meta = meta_in(S.EMPTY, epoch=MAX_EPOCH - 1)
    apply(meta, meta.init_producer_id(1000, 1, 99, expected=(7, MAX_EPOCH - 1)).transit)
    assert (meta.producer_id, meta.producer_epoch) == (99, 0)
    assert meta.init_producer_id(1000, 2, 100, expected=(7, MAX_EPOCH - 1)).error \
        is ErrorCode.none


@pytest.mark.parametrize(("producer_id", "epoch", "error"), [
    (8, 3, ErrorCode.invalid_producer_id_mapping),
    (7, 2, ErrorCode.producer_fenced),
    (7, 4, ErrorCode.producer_fenced),  # an epoch the coordinator never gave
    (7, 3, ErrorCode.none),
])
def test_check_producer(producer_id, epoch, error):
    assert meta_in(S.ONGOING).check_producer(producer_id, epoch) is error


def test_check_producer_while_completing():
    assert meta_in(S.PREPARE_COMMIT).check_producer(7, 3) is ErrorCode.concurrent_transactions


def test_adding_known_partitions_writes_nothing_and_the_clock_starts_at_the_first():
    meta = meta_in(S.EMPTY)
    apply(meta, meta.add_partitions(frozenset({("a", 0)}), 10))
    assert meta.add_partitions(frozenset({("a", 0)}), 20) is None
    apply(meta, meta.add_partitions(frozenset({("b", 1)}), 30))
    assert (meta.partitions, meta.txn_start_ms) == (frozenset({("a", 0), ("b", 1)}), 10)


@pytest.mark.parametrize(("state", "commit", "answer"), [
    (S.EMPTY, True, ErrorCode.invalid_txn_state),
    (S.EMPTY, False, ErrorCode.invalid_txn_state),
    (S.COMPLETE_COMMIT, True, ErrorCode.none),
    (S.COMPLETE_COMMIT, False, ErrorCode.invalid_txn_state),
    (S.COMPLETE_ABORT, False, ErrorCode.none),
    (S.COMPLETE_ABORT, True, ErrorCode.invalid_txn_state),
    (S.PREPARE_COMMIT, True, ErrorCode.concurrent_transactions),
    (S.PREPARE_COMMIT, False, ErrorCode.invalid_txn_state),
    (S.PREPARE_ABORT, False, ErrorCode.concurrent_transactions),
    (S.PREPARE_ABORT, True, ErrorCode.invalid_txn_state),
    (S.PREPARE_EPOCH_FENCE, True, ErrorCode.concurrent_transactions),
])
def test_end_transaction_outside_an_open_transaction(state, commit, answer):
    assert meta_in(state).end_transaction(7, 3, commit, 1) is answer


def test_end_transaction_checks_the_producer_first():
    meta = meta_in(S.ONGOING)
    assert meta.end_transaction(8, 3, True, 1) is ErrorCode.invalid_producer_id_mapping
    assert meta.end_transaction(7, 2, True, 1) is ErrorCode.producer_fenced


def test_end_transaction_of_an_ongoing_one_prepares_its_outcome():
    for commit, prepared, done in ((True, S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
                                   (False, S.PREPARE_ABORT, S.COMPLETE_ABORT)):
        meta = meta_in(S.ONGOING)
        apply(meta, meta.end_transaction(7, 3, commit, 1))
        assert meta.state is prepared
        apply(meta, meta.prepare_complete(2))
        assert meta.state is done


def test_expiry_needs_an_ongoing_transaction_past_its_timeout():
    meta = meta_in(S.ONGOING)
    meta.txn_start_ms, meta.timeout_ms = 100, 50
    assert not meta.has_expired(150) and meta.has_expired(151)
    meta.state = S.COMPLETE_COMMIT
    assert not meta.has_expired(10_000)


_REQUESTS = st.lists(st.one_of(
    st.tuples(st.just("init"), st.booleans()),
    st.tuples(st.just("add"), st.integers(0, 3)),
    st.tuples(st.just("end"), st.booleans()),
    st.tuples(st.just("complete"), st.none()),
), max_size=40)


@given(_REQUESTS, st.integers(0, MAX_EPOCH - 50))
def test_epochs_never_go_back_and_a_producer_id_only_changes_at_exhaustion(requests, epoch):
    """Whatever a client sends in whatever order, the (producer id, epoch) pair the
    coordinator hands out only grows, so a fenced epoch is never valid again."""
    meta = meta_in(S.EMPTY, epoch=epoch)
    next_id = 100
    seen = [(meta.producer_id, meta.producer_epoch)]
    for kind, arg in requests:
        if kind == "init":
            decision = meta.init_producer_id(
                1000, 1, next_id, expected=(meta.producer_id, meta.producer_epoch) if arg
                else None)
            if decision.fence:
                apply(meta, meta.prepare_fence(1))
                apply(meta, meta.prepare_abort_after_fence(1))
            elif decision.transit is not None:
                apply(meta, decision.transit)
            if meta.producer_id == next_id:
                next_id += 1
        elif kind == "add":
            if meta.check_producer(meta.producer_id, meta.producer_epoch) is ErrorCode.none:
                transit = meta.add_partitions(frozenset({("t", arg)}), 1)
                if transit is not None:
                    apply(meta, transit)
        elif kind == "end":
            outcome = meta.end_transaction(meta.producer_id, meta.producer_epoch, arg, 1)
            if not isinstance(outcome, ErrorCode):
                apply(meta, outcome)
        elif meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            apply(meta, meta.prepare_complete(1))
        current = (meta.producer_id, meta.producer_epoch)
        assert current >= seen[-1] and meta.producer_epoch <= MAX_EPOCH
        assert meta.producer_epoch != NO_EPOCH
        seen.append(current)
