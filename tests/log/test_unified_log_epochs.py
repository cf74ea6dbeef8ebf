"""Leader epochs through UnifiedLog: appends, truncation, retention, restarts, repair."""

import logging

from harness.wire.errors import ErrorCode
from reference_broker.log.log_config import LogConfig
from tests.log.log_testing import append, batch, open_log

PID = 5


def entries(log):
    return [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.epoch_entries()]


def leader_batches(first_offset, epochs_and_counts, **kw):
    """Batches as a leader wrote them: final offsets and partition leader epochs."""
    data = bytearray()
    offset = first_offset
    for epoch, count in epochs_and_counts:
        data += batch(count, base_offset=offset, partition_leader_epoch=epoch, **kw)
        offset += count
    return data


def checkpoint(directory):
    return (directory / "leader-epoch-checkpoint").read_text()


def test_leader_appends_record_each_new_epoch_at_its_first_offset(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory)
    assert log.latest_epoch is None
    append(log, batch(2), leader_epoch=0)
    append(log, batch(3), leader_epoch=0)
    append(log, batch(1), leader_epoch=1)
    assert entries(log) == [(0, 0), (1, 5)]
    assert log.latest_epoch == 1
    assert checkpoint(directory) == "0\n2\n0 0\n1 5\n"
    assert log.end_offset_for_epoch(0) == (0, 5)
    assert log.end_offset_for_epoch(1) == (1, 6)
    assert log.end_offset_for_epoch(2) == (-1, -1)
    log.close()


def test_refused_and_duplicate_appends_record_no_epoch(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(max_message_bytes=200))
    refused = append(log, batch(1, value=b"x" * 300), leader_epoch=3)
    assert refused.error == ErrorCode.message_too_large
    assert log.latest_epoch is None
    idempotent = batch(1, producer_id=PID, producer_epoch=0, base_sequence=0)
    append(log, bytearray(idempotent), leader_epoch=0)
    assert append(log, bytearray(idempotent), leader_epoch=4).duplicate
    assert entries(log) == [(0, 0)]
    log.close()


def test_follower_append_keeps_the_leaders_offsets_and_epochs(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=len(batch(2)) * 2 + 10))
    data = leader_batches(0, [(0, 2), (0, 2), (2, 2), (2, 2), (5, 2)])
    result = log.append_as_follower(data)
    assert (result.first_offset, result.last_offset) == (0, 9)
    assert log.read(0, 10**6, 10).read_bytes() == bytes(data)  # byte for byte
    assert entries(log) == [(0, 0), (2, 4), (5, 8)]
    assert log.end_offset_for_epoch(2) == (2, 8)
    log.append_as_follower(leader_batches(10, [(5, 1), (6, 1)]))
    assert entries(log) == [(0, 0), (2, 4), (5, 8), (6, 11)]
    log.close()


def test_follower_batches_without_epoch_leave_no_entry(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append_as_follower(leader_batches(0, [(-1, 2)]))
    assert log.latest_epoch is None
    log.close()


def test_truncate_to_drops_later_epochs(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory)
    log.append_as_follower(leader_batches(0, [(0, 3), (1, 3), (3, 3)]))
    assert log.truncate_to(6)
    assert entries(log) == [(0, 0), (1, 3)]
    assert log.end_offset_for_epoch(1) == (1, 6)
    assert checkpoint(directory) == "0\n2\n0 0\n1 3\n"
    assert log.truncate_to(4)  # inside the batch 3..5: the log and epoch 1 end at 3
    assert log.log_end_offset == 3 and entries(log) == [(0, 0)]
    log.close()


def test_truncate_fully_clears_the_epochs(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory)
    log.append_as_follower(leader_batches(0, [(0, 3), (1, 3)]))
    log.truncate_fully_and_start_at(100)
    assert entries(log) == [] and checkpoint(directory) == "0\n0\n"
    log.append_as_follower(leader_batches(100, [(4, 1)]))
    assert entries(log) == [(4, 100)]
    log.close()


def test_log_start_moves_the_first_epoch_up(tmp_path):
    config = LogConfig(segment_bytes=len(batch(3)) * 2, retention_ms=-1)
    log = open_log(tmp_path / "t-0", config)
    log.append_as_follower(leader_batches(0, [(0, 3), (0, 3), (1, 3), (1, 3), (2, 3)]))
    assert [s.base_offset for s in log.segments] == [0, 6, 12]
    assert log.maybe_increment_log_start_offset(4)
    assert entries(log) == [(0, 4), (1, 6), (2, 12)]
    assert not log.maybe_increment_log_start_offset(2)
    assert log.read(4, 10**6, 15).read_bytes()  # still readable from the new start
    assert log.delete_old_segments() == 0  # segment 0 still holds offset 4
    assert log.maybe_increment_log_start_offset(7)
    assert log.delete_old_segments() == 1
    assert entries(log) == [(1, 7), (2, 12)]
    log.close()


def test_retention_moves_the_first_epoch_up(tmp_path):
    config = LogConfig(
        segment_bytes=len(batch(3)) * 2, retention_bytes=len(batch(3)) * 3, retention_ms=-1
    )
    log = open_log(tmp_path / "t-0", config)
    log.append_as_follower(leader_batches(0, [(0, 3), (0, 3), (1, 3), (1, 3), (2, 3)]))
    assert log.delete_old_segments() == 1
    assert log.log_start_offset == 6
    assert entries(log) == [(1, 6), (2, 12)]
    log.close()


def test_epochs_survive_a_restart(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory)
    for epoch in (0, 0, 1, 3):
        append(log, batch(2), leader_epoch=epoch)
    log.close()
    reopened = open_log(directory)
    assert entries(reopened) == [(0, 0), (1, 4), (3, 6)]
    assert reopened.end_offset_for_epoch(1) == (1, 6)
    reopened.close()


def test_epochs_survive_an_unclean_restart_and_follow_recovery(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory)
    append(log, batch(2), leader_epoch=0)
    append(log, batch(2), leader_epoch=1)
    log.flush()
    log.leader_epoch_cache.assign(2, 4)  # became leader of epoch 2, then crashed
    reopened = open_log(directory)  # no close: unflushed state is recovered
    assert entries(reopened) == [(0, 0), (1, 2)]  # epoch 2 had no data: cut with the log end
    reopened.close()


def test_missing_checkpoint_is_rebuilt_from_the_log(tmp_path, caplog):
    directory = tmp_path / "t-0"
    log = open_log(directory)
    for epoch in (0, 0, 2, 2, 5):
        append(log, batch(1), leader_epoch=epoch)
    log.close()
    (directory / "leader-epoch-checkpoint").unlink()
    with caplog.at_level(logging.INFO, logger="reference_broker.log"):
        reopened = open_log(directory)
    assert entries(reopened) == [(0, 0), (2, 2), (5, 4)]
    assert checkpoint(directory) == "0\n3\n0 0\n2 2\n5 4\n"
    assert "rebuilding the leader epoch cache from the log" in caplog.text
    reopened.close()


def test_corrupt_checkpoint_is_reported_and_rebuilt(tmp_path, caplog):
    directory = tmp_path / "t-0"
    log = open_log(directory)
    append(log, batch(1), leader_epoch=0)
    append(log, batch(1), leader_epoch=3)
    log.close()
    (directory / "leader-epoch-checkpoint").write_text("0\n7\ngarbage\n")
    with caplog.at_level(logging.ERROR, logger="reference_broker.log"):
        reopened = open_log(directory)
    assert entries(reopened) == [(0, 0), (3, 1)]
    assert "is corrupt" in caplog.text
    reopened.close()


def test_checkpoint_behind_the_log_is_rebuilt(tmp_path, caplog):
    directory = tmp_path / "t-0"
    log = open_log(directory)
    append(log, batch(1), leader_epoch=0)
    append(log, batch(1), leader_epoch=4)
    log.close()
    (directory / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")  # lost the epoch 4 entry
    with caplog.at_level(logging.WARNING, logger="reference_broker.log"):
        reopened = open_log(directory)
    assert entries(reopened) == [(0, 0), (4, 1)]
    assert "the last batch has leader epoch 4" in caplog.text
    reopened.close()


def test_rebuild_respects_the_log_start_offset(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory)
    log.append_as_follower(leader_batches(0, [(0, 3), (1, 3)]))
    log.close()
    (directory / "leader-epoch-checkpoint").unlink()
    reopened = open_log(directory, log_start_offset=2)
    assert entries(reopened) == [(0, 2), (1, 3)]
    reopened.close()


def test_follower_roll_snapshot_covers_the_batches_before_it(tmp_path):
    """A roll inside one follower append snapshots producer state including the batches
    written earlier in that same call, so a restart that starts from that snapshot still
    recognises their retries."""
    directory = tmp_path / "t-0"
    one = batch(2, producer_id=PID, producer_epoch=0, base_sequence=0)
    log = open_log(directory, LogConfig(segment_bytes=len(one) + 10))
    data = leader_batches(0, [(0, 2)], producer_id=PID, producer_epoch=0, base_sequence=0)
    data += leader_batches(2, [(0, 2)], producer_id=PID, producer_epoch=0, base_sequence=2)
    log.append_as_follower(data)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.flush()
    reopened = open_log(directory)  # no close, so no snapshot at the log end
    retry = batch(2, producer_id=PID, producer_epoch=0, base_sequence=0)
    assert append(reopened, retry).duplicate
    reopened.close()


def test_a_new_log_writes_its_checkpoint_at_the_first_epoch(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory)
    assert not (directory / "leader-epoch-checkpoint").exists()
    append(log, batch(1), leader_epoch=0)
    assert checkpoint(directory) == "0\n1\n0 0\n"
    log.close()
