import pytest

from harness.wire.records import patch_base_offset, read_header
from reference_broker.log.producer_state import (
    INVALID_PRODUCER_EPOCH,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    ProducerStateManager,
    read_snapshot_file,
    write_snapshot_file,
)
from tests.log.log_testing import batch

PID = 4242


def header(seq, *, count=1, epoch=0, pid=PID, base_offset=0, timestamp_ms=1_000):
    data = batch(
        count, producer_id=pid, producer_epoch=epoch, base_sequence=seq, timestamp_ms=timestamp_ms
    )
    patch_base_offset(data, 0, base_offset)
    return read_header(data)


def accepted(state, h, first_offset):
    verdict = state.check(h)
    assert verdict.ok, verdict
    state.update(h, first_offset, first_offset + h.last_offset_delta)


def test_new_producer_must_start_at_sequence_zero():
    state = ProducerStateManager()
    assert state.check(header(0)).ok
    assert state.check(header(5)).error == OUT_OF_ORDER_SEQUENCE_NUMBER


def test_sequences_must_follow_each_other():
    state = ProducerStateManager()
    accepted(state, header(0, count=3), 0)
    assert state.check(header(4)).error == OUT_OF_ORDER_SEQUENCE_NUMBER  # gap
    assert state.check(header(1)).error == OUT_OF_ORDER_SEQUENCE_NUMBER  # overlaps, not a dup
    accepted(state, header(3, count=2), 3)
    assert state.get(PID).last_seq == 4


def test_retry_of_any_of_the_last_five_batches_is_a_duplicate():
    state = ProducerStateManager()
    for i in range(7):
        accepted(state, header(i * 2, count=2), 100 + i * 2)
    for i in range(2, 7):
        verdict = state.check(header(i * 2, count=2))
        assert verdict.duplicate is not None
        assert (verdict.duplicate.first_offset, verdict.duplicate.last_offset) == (
            100 + i * 2,
            101 + i * 2,
        )
    # older than the last five: no longer recognised
    assert state.check(header(0, count=2)).error == OUT_OF_ORDER_SEQUENCE_NUMBER


def test_lower_epoch_is_fenced_and_higher_epoch_restarts_at_zero():
    state = ProducerStateManager()
    accepted(state, header(0, epoch=3), 0)
    assert state.check(header(1, epoch=2)).error == INVALID_PRODUCER_EPOCH
    assert state.check(header(1, epoch=4)).error == OUT_OF_ORDER_SEQUENCE_NUMBER
    accepted(state, header(0, epoch=4), 1)
    assert state.get(PID).producer_epoch == 4
    assert len(state.get(PID).batches) == 1  # the old epoch's batches are forgotten
    assert state.check(header(0, epoch=3)).error == INVALID_PRODUCER_EPOCH


def test_sequence_wraps_after_int32_max():
    state = ProducerStateManager()
    state.update(header(2**31 - 2, count=2), 1, 2)  # sequence numbers wrap in Kafka
    assert state.get(PID).last_seq == 2**31 - 1
    assert state.check(header(0)).ok


def test_batch_without_sequence_from_known_producer_is_refused():
    state = ProducerStateManager()
    assert state.check(header(-1)).error == OUT_OF_ORDER_SEQUENCE_NUMBER


def test_producers_are_independent():
    state = ProducerStateManager()
    accepted(state, header(0, pid=1), 0)
    accepted(state, header(0, pid=2), 1)
    assert state.check(header(1, pid=1)).ok
    assert state.check(header(0, pid=2)).duplicate.first_offset == 1
    assert len(state) == 2


def test_rebuild_from_log_headers_restores_dedup():
    headers = [header(i, base_offset=10 + i) for i in range(3)]
    headers.append(header(-1, pid=-1, base_offset=13))  # non-idempotent batches are skipped
    state = ProducerStateManager()
    state.rebuild_from((h, None) for h in headers)
    assert state.check(header(2)).duplicate.first_offset == 12
    assert state.check(header(3)).ok
    assert len(state) == 1


def test_snapshot_round_trip(tmp_path):
    state = ProducerStateManager()
    for pid in (1, 2, 3):
        for i in range(6):
            accepted(state, header(i, pid=pid, epoch=pid), pid * 100 + i)
    path = tmp_path / "00000000000000000010.snapshot"
    write_snapshot_file(path, state)
    restored = read_snapshot_file(path)
    assert len(restored) == 3
    for pid in (1, 2, 3):
        assert restored.get(pid) == state.get(pid)
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("damage", [lambda b: b[:-1], lambda b: b[:3], lambda b: b"x" + b[1:]])
def test_damaged_snapshot_is_rejected(damage):
    state = ProducerStateManager()
    accepted(state, header(0), 0)
    with pytest.raises(ValueError):
        ProducerStateManager.from_snapshot(damage(state.to_snapshot()))
