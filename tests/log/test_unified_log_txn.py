"""Transactions in the log: markers, the last stable offset, the .txnindex, crashes, followers."""

from harness.wire.control_records import ControlType, EndTxnMarker, marker_of
from harness.wire.errors import ErrorCode
from harness.wire.records import iter_headers
from reference_broker.log.log_config import LogConfig
from reference_broker.log.transaction_index import AbortedTxn
from tests.log.log_testing import FakeClock, append, batch
from tests.log.log_testing import open_log as _open_log

PID_A, PID_B = 100, 200


def open_log(directory, config=None):
    """A log whose clock is near the batches' timestamps: a marker stamped with the wall
    clock would otherwise roll the segment (segment.ms counts from the first batch)."""
    return _open_log(directory, config, now_ms=FakeClock())


def commit(epoch=5):
    return EndTxnMarker(ControlType.COMMIT, epoch)


def abort(epoch=5):
    return EndTxnMarker(ControlType.ABORT, epoch)


def txn(log, pid, seq, count=1, epoch=0):
    result = append(log, batch(count, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                               transactional=True))
    assert result.error is None, result
    return result


def end(log, pid, marker, epoch=0):
    result = log.append_marker_as_leader(marker, producer_id=pid, producer_epoch=epoch,
                                         leader_epoch=0)
    assert result.error is None, result
    return result


def test_an_open_transaction_holds_the_stable_offset_back_until_its_marker(tmp_path):
    log = open_log(tmp_path / "t-0")
    append(log, batch(2))  # plain records, offsets 0-1
    txn(log, PID_A, 0, count=2)  # 2-3
    txn(log, PID_B, 0)  # 4
    assert log.first_unstable_offset == 2
    assert log.last_stable_offset(high_watermark=5) == 2
    assert log.last_stable_offset(high_watermark=1) == 1  # bounded by the high watermark
    marker = end(log, PID_A, commit())
    assert (marker.first_offset, marker.last_offset) == (5, 5)
    assert log.last_stable_offset(high_watermark=6) == 4  # B still open
    end(log, PID_B, abort())
    assert log.first_unstable_offset is None
    assert log.last_stable_offset(high_watermark=7) == 7


def test_the_marker_is_a_control_batch_of_the_producer(tmp_path):
    log = open_log(tmp_path / "t-0")
    txn(log, PID_A, 0)
    end(log, PID_A, abort(epoch=9))
    data = log.read(0, 10_000, log.log_end_offset).read_bytes()
    *_, header = iter_headers(data)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_offset) == (PID_A, 0, 1)
    assert marker_of(data, header) == abort(epoch=9)


def test_aborts_go_to_the_active_segments_index_and_are_collected(tmp_path):
    log = open_log(tmp_path / "t-0")
    txn(log, PID_A, 0, count=3)  # 0-2
    txn(log, PID_B, 0)  # 3
    end(log, PID_A, abort())  # 4: LSO then held at 3 by B
    end(log, PID_B, commit())  # 5
    log.roll()
    txn(log, PID_B, 1)  # 6
    end(log, PID_B, abort())  # 7
    first, second = log.segments
    assert first.txn_index.entries == (AbortedTxn(PID_A, 0, 4, 3),)
    assert second.txn_index.entries == (AbortedTxn(PID_B, 6, 7, 8),)
    assert (tmp_path / "t-0" / "00000000000000000006.txnindex").exists()
    assert log.collect_aborted_transactions(0, 8) == [AbortedTxn(PID_A, 0, 4, 3),
                                                      AbortedTxn(PID_B, 6, 7, 8)]
    assert log.collect_aborted_transactions(5, 8) == [AbortedTxn(PID_B, 6, 7, 8)]
    assert log.collect_aborted_transactions(2, 3) == [AbortedTxn(PID_A, 0, 4, 3)]


def test_marker_epoch_checks_refuse_without_writing(tmp_path):
    log = open_log(tmp_path / "t-0")
    txn(log, PID_A, 0, epoch=3)
    end(log, PID_A, commit(epoch=5), epoch=3)
    zombie = log.append_marker_as_leader(abort(), producer_id=PID_A, producer_epoch=2,
                                         leader_epoch=0)
    deposed = log.append_marker_as_leader(abort(epoch=4), producer_id=PID_A, producer_epoch=3,
                                          leader_epoch=0)
    assert zombie.error is ErrorCode.invalid_producer_epoch
    assert deposed.error is ErrorCode.transaction_coordinator_fenced
    assert log.log_end_offset == 2


def test_a_kill_mid_transaction_keeps_it_open(tmp_path):
    """No close: the log is reopened as after kill -9, from its files and snapshots alone."""
    directory = tmp_path / "t-0"
    log = open_log(directory, LogConfig(segment_bytes=len(batch(1)) * 3))
    txn(log, PID_A, 0)  # 0
    end(log, PID_A, abort())  # 1
    txn(log, PID_A, 1)  # 2: rolls, so a snapshot covers the open transaction and the abort
    txn(log, PID_B, 0)  # 3
    txn(log, PID_A, 2)  # 4
    for segment in log.segments:
        segment.flush()
    assert len(log.segments) >= 2
    reopened = open_log(directory, LogConfig(segment_bytes=len(batch(1)) * 3))
    assert reopened.producer_state.ongoing_transactions() == {PID_A: 2, PID_B: 3}
    assert reopened.last_stable_offset(high_watermark=5) == 2
    assert reopened.collect_aborted_transactions(0, 5) == [AbortedTxn(PID_A, 0, 1, 2)]
    end(reopened, PID_A, commit())
    assert reopened.last_stable_offset(high_watermark=6) == 3


def test_an_unclean_restart_rebuilds_a_lost_txnindex_and_drops_stale_entries(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory)
    txn(log, PID_A, 0)
    end(log, PID_A, abort())
    txn(log, PID_B, 0)
    end(log, PID_B, abort())
    log.segments[0].flush()
    (directory / "00000000000000000000.txnindex").unlink()  # lost with the page cache
    reopened = open_log(directory)
    assert reopened.segments[0].txn_index.entries == (AbortedTxn(PID_A, 0, 1, 2),
                                                      AbortedTxn(PID_B, 2, 3, 4))
    reopened.truncate_to(3)  # the second abort's marker goes
    assert reopened.segments[0].txn_index.entries == (AbortedTxn(PID_A, 0, 1, 2),)
    assert reopened.producer_state.ongoing_transactions() == {PID_B: 2}
    assert reopened.last_stable_offset(high_watermark=3) == 2


def test_a_follower_copying_the_bytes_gets_the_same_state_and_index(tmp_path):
    leader = open_log(tmp_path / "leader" / "t-0")
    txn(leader, PID_A, 0, count=2)
    txn(leader, PID_B, 0)
    end(leader, PID_A, abort())
    txn(leader, PID_A, 2)
    data = leader.read(0, 100_000, leader.log_end_offset).read_bytes()
    follower = open_log(tmp_path / "follower" / "t-0")
    follower.append_as_follower(bytearray(data))
    assert follower.log_end_offset == leader.log_end_offset
    assert follower.producer_state.ongoing_transactions() == \
        leader.producer_state.ongoing_transactions() == {PID_B: 2, PID_A: 4}
    assert follower.segments[0].txn_index.entries == leader.segments[0].txn_index.entries \
        == (AbortedTxn(PID_A, 0, 3, 2),)
    assert follower.producer_state.get(PID_A).coordinator_epoch == 5


def test_retention_deletes_the_txnindex_with_its_segment(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory)
    txn(log, PID_A, 0)
    end(log, PID_A, abort())
    log.roll()
    append(log, batch(1))
    assert (directory / "00000000000000000000.txnindex").exists()
    log.maybe_increment_log_start_offset(2)
    assert log.delete_old_segments() == 1
    assert not (directory / "00000000000000000000.txnindex").exists()
