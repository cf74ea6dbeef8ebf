"""Transactions in the producer state (Kafka's ProducerStateManager): pure, no log."""

import struct

import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.wire.control_records import ControlType, EndTxnMarker, build_marker_batch
from harness.wire.records import patch_base_offset, read_header
from reference_broker.log.producer_state import (
    INVALID_PRODUCER_EPOCH,
    INVALID_TXN_STATE,
    TRANSACTION_COORDINATOR_FENCED,
    AppendOrigin,
    CompletedTxn,
    ProducerStateManager,
)
from tests.log.log_testing import batch

COMMIT = EndTxnMarker(ControlType.COMMIT, coordinator_epoch=3)
ABORT = EndTxnMarker(ControlType.ABORT, coordinator_epoch=3)


def txn_header(pid, seq, *, epoch=0, count=1, base_offset=0, transactional=True):
    data = batch(count, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                 transactional=transactional)
    patch_base_offset(data, 0, base_offset)
    return read_header(data)


def write(state, h):
    verdict = state.check(h)
    assert verdict.ok, verdict
    state.update(h, h.base_offset, h.last_offset)


def test_a_transactional_batch_opens_a_transaction_at_its_first_offset():
    state = ProducerStateManager()
    assert state.first_unstable_offset() is None
    write(state, txn_header(7, 0, count=3, base_offset=10))
    write(state, txn_header(7, 3, base_offset=13))  # the same transaction goes on
    assert state.first_unstable_offset() == 10
    assert state.ongoing_transactions() == {7: 10}
    assert state.get(7).current_txn_first_offset == 10


def test_a_marker_ends_the_transaction_with_its_own_offset_as_last():
    state = ProducerStateManager()
    write(state, txn_header(7, 0, count=2, base_offset=10))
    assert state.check_marker(7, 0, COMMIT.coordinator_epoch) is None
    done = state.complete(7, 0, COMMIT, offset=12)
    assert done == CompletedTxn(7, 10, 12, is_aborted=False, last_stable_offset=13)
    assert state.first_unstable_offset() is None
    assert state.get(7).coordinator_epoch == 3


def test_an_abort_records_the_stable_offset_held_back_by_another_transaction():
    state = ProducerStateManager()
    write(state, txn_header(1, 0, base_offset=5))
    write(state, txn_header(2, 0, base_offset=6))
    done = state.complete(2, 0, ABORT, offset=7)
    assert done == CompletedTxn(2, 6, 7, is_aborted=True, last_stable_offset=5)
    assert state.first_unstable_offset() == 5


def test_a_marker_without_a_transaction_spans_only_itself():
    state = ProducerStateManager()
    assert state.complete(9, 0, ABORT, offset=4) == CompletedTxn(9, 4, 4, True, 5)


def test_marker_epoch_rules():
    state = ProducerStateManager()
    write(state, txn_header(7, 0, epoch=2, base_offset=0))
    assert state.check_marker(7, 1, 3) == INVALID_PRODUCER_EPOCH  # a zombie's transaction
    assert state.check_marker(7, 3, 3) is None  # the coordinator bumped the epoch (abort)
    state.complete(7, 3, ABORT, offset=1)
    assert state.get(7).producer_epoch == 3
    assert state.check_marker(7, 3, 2) == TRANSACTION_COORDINATOR_FENCED
    assert state.check_marker(7, 3, 4) is None
    # the new epoch starts its sequences again
    assert state.check(txn_header(7, 0, epoch=3)).ok


def test_a_producer_inside_a_transaction_cannot_write_outside_it():
    state = ProducerStateManager()
    write(state, txn_header(7, 0))
    assert state.check(txn_header(7, 1, transactional=False)).error == INVALID_TXN_STATE
    assert state.check(txn_header(7, 0, epoch=1, transactional=False)).error == \
        INVALID_TXN_STATE  # a bumped epoch does not end the transaction
    assert state.check(txn_header(7, 0, transactional=False)).duplicate is not None
    state.complete(7, 0, COMMIT, offset=1)
    assert state.check(txn_header(7, 1, transactional=False)).ok


def test_replay_applies_markers_and_reports_completed_transactions():
    state = ProducerStateManager()
    batches = [
        (txn_header(1, 0, base_offset=0), None),
        (txn_header(2, 0, base_offset=1), None),
        (control_header(1, 0, base_offset=2), ABORT),
        (txn_header(1, 1, base_offset=3), None),
        (control_header(3, 0, base_offset=4), None),  # a control batch holding no marker
    ]
    completed = state.rebuild_from(batches)
    assert completed == [CompletedTxn(1, 0, 2, True, 1)]
    assert state.ongoing_transactions() == {2: 1, 1: 3}


def control_header(pid, epoch, *, base_offset):
    data = bytearray(build_marker_batch(ABORT, producer_id=pid, producer_epoch=epoch,
                                        timestamp_ms=0, base_offset=base_offset))
    return read_header(data)


def test_snapshot_keeps_ongoing_transactions_and_coordinator_epochs():
    state = ProducerStateManager()
    write(state, txn_header(1, 0, base_offset=0))
    state.complete(1, 0, COMMIT, offset=1)
    write(state, txn_header(2, 0, count=2, base_offset=2))
    copy = ProducerStateManager.from_snapshot(state.to_snapshot())
    assert copy.ongoing_transactions() == {2: 2}
    assert copy.first_unstable_offset() == 2
    assert copy.get(1).coordinator_epoch == 3
    assert copy.check(txn_header(2, 0, count=2, base_offset=2)).duplicate is not None


def test_snapshot_keeps_each_producers_last_timestamp():
    state = ProducerStateManager()
    header = txn_header(7, 0, base_offset=0)
    write(state, header)
    assert header.max_timestamp > 0
    assert state.get(7).last_timestamp == header.max_timestamp
    copy = ProducerStateManager.from_snapshot(state.to_snapshot())
    assert [e.last_timestamp for e in copy.active_producers()] == [header.max_timestamp]


def test_a_version_2_snapshot_is_still_read_with_no_timestamp_known():
    pid, epoch = 5, 1
    body = struct.pack(">hi", 2, 1) + struct.pack(">qhiqb", pid, epoch, 4, 40, 1)
    body += struct.pack(">iiqqq", 0, 0, 40, 40, -1)
    state = ProducerStateManager.from_snapshot(body + struct.pack(">I", crc32c.crc32c(body)))
    entry = state.get(pid)
    assert (entry.producer_epoch, entry.coordinator_epoch, entry.last_timestamp) == (epoch, 4, -1)
    assert state.ongoing_transactions() == {pid: 40}


def test_a_version_1_snapshot_is_still_read():
    pid, epoch = 5, 1
    body = struct.pack(">hi", 1, 1) + struct.pack(">qhb", pid, epoch, 1)
    body += struct.pack(">iiqqq", 0, 0, 40, 40, -1)
    state = ProducerStateManager.from_snapshot(body + struct.pack(">I", crc32c.crc32c(body)))
    assert state.get(pid).producer_epoch == epoch
    assert state.first_unstable_offset() is None
    assert state.check(txn_header(pid, 1, epoch=epoch)).ok


# --- a property: the state agrees with a plain model of open transactions -------------------

_ops = st.lists(
    st.tuples(st.sampled_from(["data", "commit", "abort"]), st.integers(0, 3)),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(_ops)
def test_transactions_follow_a_simple_model(ops):
    state = ProducerStateManager()
    model: dict[int, int] = {}  # producer id -> first offset of its open transaction
    seqs: dict[int, int] = {}
    for offset, (op, pid) in enumerate(ops):
        if op == "data":
            h = txn_header(pid, seqs.get(pid, 0), base_offset=offset)
            write(state, h)
            seqs[pid] = seqs.get(pid, 0) + 1
            model.setdefault(pid, offset)
        else:
            marker = COMMIT if op == "commit" else ABORT
            assert state.check_marker(pid, 0, marker.coordinator_epoch) is None
            done = state.complete(pid, 0, marker, offset)
            first = model.pop(pid, offset)
            assert (done.first_offset, done.last_offset) == (first, offset)
            assert done.is_aborted == (op == "abort")
            assert done.last_stable_offset == min(model.values(), default=offset + 1)
        assert state.ongoing_transactions() == model
        assert state.first_unstable_offset() == min(model.values(), default=None)
    restored = ProducerStateManager.from_snapshot(state.to_snapshot())
    assert restored.ongoing_transactions() == model


def test_a_coordinators_batch_has_no_sequence_and_is_held_to_the_epoch_only():
    """A TxnOffsetCommit's batch, written by the group coordinator for a producer, carries no
    sequence (Kafka's AppendOrigin.Coordinator): a client's such batch is out of order, the
    coordinator's opens the transaction; an older epoch is fenced either way."""
    state = ProducerStateManager()
    unsequenced = txn_header(7, -1, epoch=2, base_offset=4)
    assert not state.check(unsequenced).ok
    assert state.check(unsequenced, AppendOrigin.COORDINATOR).ok
    state.update(unsequenced, 4, 4)
    assert state.first_unstable_offset() == 4
    older = txn_header(7, -1, epoch=1, base_offset=5)
    assert state.check(older, AppendOrigin.COORDINATOR).error is INVALID_PRODUCER_EPOCH
