import pytest

from harness.wire.errors import ErrorCode
from harness.wire.records import iter_headers, patch_base_offset, read_header
from reference_broker.log.errors import CorruptRecord, UnexpectedAppendOffset
from reference_broker.log.log_config import LogConfig
from tests.log.log_testing import FakeClock, append, append_many, batch, headers_of, open_log

PID = 77


def idempotent(seq, count=1, epoch=0):
    return batch(count, producer_id=PID, producer_epoch=epoch, base_sequence=seq)


def stored_headers(log):
    return headers_of(log.read(log.log_start_offset, 10**9, log.log_end_offset).read_bytes())


def test_offsets_are_assigned_from_the_log_end(tmp_path):
    log = open_log(tmp_path / "t-0")
    results = [append(log, batch(n)) for n in (1, 3, 2)]
    assert [(r.first_offset, r.last_offset) for r in results] == [(0, 0), (1, 3), (4, 5)]
    assert log.log_end_offset == 6
    assert all(r.log_append_time_ms == -1 and r.error is None for r in results)
    assert [h.base_offset for h in stored_headers(log)] == [0, 1, 4]
    log.close()


def test_leader_epoch_is_stamped_and_crc_still_valid(tmp_path):
    log = open_log(tmp_path / "t-0")
    append(log, batch(2), leader_epoch=7)
    (header,) = stored_headers(log)
    assert header.partition_leader_epoch == 7
    log.close()
    assert open_log(tmp_path / "t-0").log_end_offset == 2  # recovery checks the CRC


def test_log_append_time_is_stamped_when_configured(tmp_path):
    clock = FakeClock(5_000_000)
    log = open_log(
        tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"), now_ms=clock
    )
    result = append(log, batch(2, timestamp_ms=1))
    assert result.log_append_time_ms == 5_000_000
    (header,) = stored_headers(log)
    assert header.is_log_append_time and header.max_timestamp == 5_000_000
    result = append(log, batch(1), now_ms=6_000_000)
    assert result.log_append_time_ms == 6_000_000
    log.close()
    reopened = open_log(tmp_path / "t-0")  # unclean open: CRC verified after the restamp
    assert reopened.log_end_offset == 3
    reopened.close()


def test_oversized_batches_are_refused_without_writing(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(max_message_bytes=200, segment_bytes=150))
    result = append(log, batch(1, value=b"x" * 300))
    assert result.error == ErrorCode.message_too_large and result.first_offset == -1
    result = append(log, batch(1, value=b"x" * 100))
    assert result.error == ErrorCode.record_list_too_large
    assert log.log_end_offset == 0 and log.size_in_bytes == 0
    log.close()


def test_rolls_when_segment_would_exceed_segment_bytes(tmp_path):
    size = len(batch(1))
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=size * 3))
    append_many(log, 10)
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 9]
    assert all(s.size <= size * 3 for s in log.segments)
    # the rolled segments were flushed: the recovery point reached the active segment
    assert log.recovery_point == 9
    log.close()


def test_rolls_when_record_time_passes_segment_ms(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(segment_ms=1_000))
    append(log, batch(1, timestamp_ms=10_000))
    append(log, batch(1, timestamp_ms=11_000))
    assert len(log.segments) == 1
    append(log, batch(1, timestamp_ms=11_001))
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_roll_is_a_no_op_on_an_empty_active_segment(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.roll()
    append(log, batch(1))
    log.roll()
    log.roll()
    assert [s.base_offset for s in log.segments] == [0, 1]
    log.close()


def test_rolls_when_the_index_is_full(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(index_interval_bytes=0, max_index_size=24))
    append_many(log, 10)
    assert len(log.segments) > 2
    log.close()


def test_flush_interval_messages_advances_recovery_point(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(flush_interval_messages=3))
    append_many(log, 2)
    assert log.recovery_point == 0
    append_many(log, 1)
    assert log.recovery_point == 3
    log.close()


def test_flush_due_follows_flush_ms(tmp_path):
    clock = FakeClock()
    log = open_log(tmp_path / "t-0", LogConfig(flush_interval_ms=100), now_ms=clock)
    append(log, batch(1))
    assert not log.flush_due(clock.now + 99)
    assert log.flush_due(clock.now + 100)
    clock.advance(100)
    log.flush()
    assert log.recovery_point == 1
    assert not log.flush_due(clock.now + 1_000)  # nothing unflushed
    log.close()
    never = open_log(tmp_path / "t-1", now_ms=clock)
    append(never, batch(1))
    assert not never.flush_due(clock.now + 10**12)
    never.close()


def test_flush_up_to_offset(tmp_path):
    log = open_log(tmp_path / "t-0")
    append_many(log, 5)
    log.flush(3)
    assert log.recovery_point == 3
    log.flush(100)
    assert log.recovery_point == 5
    log.close()


def test_idempotent_retry_returns_original_offsets_and_writes_nothing(tmp_path):
    log = open_log(tmp_path / "t-0")
    first = append(log, idempotent(0, count=2))
    append(log, idempotent(2))
    size = log.size_in_bytes
    retry = append(log, idempotent(0, count=2))
    assert retry.duplicate
    assert (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    assert log.size_in_bytes == size and log.log_end_offset == 3
    log.close()


def test_duplicate_on_log_append_time_topic_reports_the_original_append_time(tmp_path):
    clock = FakeClock(1_000)
    log = open_log(
        tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"), now_ms=clock
    )
    append(log, idempotent(0))
    clock.advance(500)
    assert append(log, idempotent(0)).log_append_time_ms == 1_000
    log.close()


def test_out_of_order_and_fenced_batches_are_refused(tmp_path):
    log = open_log(tmp_path / "t-0")
    assert append(log, idempotent(1)).error == ErrorCode.out_of_order_sequence_number
    append(log, idempotent(0, epoch=2))
    assert append(log, idempotent(5, epoch=2)).error == ErrorCode.out_of_order_sequence_number
    assert append(log, idempotent(1, epoch=1)).error == ErrorCode.invalid_producer_epoch
    assert log.log_end_offset == 1
    log.close()


@pytest.mark.parametrize("clean", [True, False])
def test_producer_state_survives_reopen(tmp_path, clean):
    directory = tmp_path / "t-0"
    log = open_log(directory, LogConfig(segment_bytes=len(batch(1)) * 2))
    results = [append(log, idempotent(seq)) for seq in range(5)]
    if clean:
        log.close()
    else:
        log.flush()  # a crash: no closing snapshot, state comes from roll snapshots + replay
    reopened = open_log(directory, had_clean_shutdown=clean)
    retry = append(reopened, idempotent(4))
    assert retry.duplicate and retry.first_offset == results[4].first_offset
    assert append(reopened, idempotent(6)).error == ErrorCode.out_of_order_sequence_number
    assert append(reopened, idempotent(5)).first_offset == 5
    reopened.close()


def test_producer_state_rebuilt_from_log_without_snapshots(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory)
    append(log, idempotent(0))
    append(log, idempotent(1))
    log.close()
    for snapshot in directory.glob("*.snapshot"):
        snapshot.unlink()
    reopened = open_log(directory)
    assert append(reopened, idempotent(1)).duplicate
    reopened.close()


def test_unreadable_snapshot_falls_back_to_replay(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory)
    append(log, idempotent(0))
    log.close()
    (snapshot,) = directory.glob("*.snapshot")
    snapshot.write_bytes(b"garbage")
    reopened = open_log(directory)
    assert append(reopened, idempotent(0)).duplicate
    reopened.close()


def follower_batches(first_offset, counts):
    data = bytearray()
    offset = first_offset
    for count in counts:
        one = batch(count)
        patch_base_offset(one, 0, offset)
        data += one
        offset += count
    return data


def test_follower_append_keeps_leader_offsets_and_bytes(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=len(batch(2)) * 2 + 10))
    data = follower_batches(0, [2, 2, 2, 2, 2])
    result = log.append_as_follower(data)
    assert (result.first_offset, result.last_offset) == (0, 9)
    assert log.log_end_offset == 10
    assert len(log.segments) == 3
    assert log.read(0, 10**6, 10).read_bytes() == bytes(data)
    log.close()


def test_follower_append_ignores_a_partial_trailing_batch(tmp_path):
    log = open_log(tmp_path / "t-0")
    data = follower_batches(0, [1, 1])
    assert log.append_as_follower(data[:-5]).last_offset == 0
    assert log.append_as_follower(data[:20]) is None
    assert log.log_end_offset == 1
    log.close()


def test_follower_append_rejects_offsets_that_do_not_continue_the_log(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append_as_follower(follower_batches(0, [3]))
    with pytest.raises(UnexpectedAppendOffset):
        log.append_as_follower(follower_batches(2, [1]))
    log.append_as_follower(follower_batches(10, [1]))  # a gap is allowed, as in Kafka
    assert log.log_end_offset == 11
    log.close()


def test_follower_append_rejects_corrupt_batches(tmp_path):
    log = open_log(tmp_path / "t-0")
    data = follower_batches(0, [1])
    data[-1] ^= 1
    with pytest.raises(CorruptRecord):
        log.append_as_follower(data)
    assert log.log_end_offset == 0
    log.close()


def test_follower_append_updates_producer_state(tmp_path):
    log = open_log(tmp_path / "t-0")
    data = idempotent(0, count=2)
    log.append_as_follower(data)
    assert append(log, idempotent(0, count=2)).duplicate  # became leader: retry recognised
    log.close()


def test_truncate_to_drops_later_batches_and_segments(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=len(batch(2)) * 2))
    for seq in range(6):
        append(log, idempotent(seq * 2, count=2))
    assert log.truncate_to(5)  # inside the batch 4..5: the log ends at 4
    assert log.log_end_offset == 4
    assert [s.base_offset for s in log.segments] == [0, 4]
    assert [h.base_offset for h in stored_headers(log)] == [0, 2]
    # the producer state forgot the truncated batches: sequence 4 is expected again
    assert append(log, idempotent(4, count=2)).first_offset == 4
    assert not log.truncate_to(100)
    log.close()
    assert open_log(tmp_path / "t-0").log_end_offset == 6


def test_truncate_fully_and_start_at(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory)
    append(log, idempotent(0))
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset) == (500, 500)
    assert append(log, idempotent(1)).error == ErrorCode.out_of_order_sequence_number  # state reset
    assert append(log, batch(1)).first_offset == 500
    log.close()
    reopened = open_log(directory)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (500, 501)
    reopened.close()


def test_truncate_below_log_start_resets_the_log(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.truncate_fully_and_start_at(100)
    append_many(log, 3)
    assert log.truncate_to(50)
    assert (log.log_start_offset, log.log_end_offset) == (50, 50)
    log.close()


def test_append_patches_only_the_batch_inside_a_larger_buffer(tmp_path):
    log = open_log(tmp_path / "t-0")
    one = batch(2)
    buffer = bytearray(b"\xaa" * 7) + one + bytearray(b"\xbb" * 5)
    header = read_header(buffer, 7)
    result = log.append_as_leader(buffer, header, leader_epoch=1)
    assert result.first_offset == 0
    assert list(iter_headers(log.read(0, 10**6, 10).read_bytes()))[0].size == len(one)
    log.close()
