from reference_broker.log.log_config import LogConfig
from reference_broker.log.unified_log import UnifiedLog
from tests.log.log_testing import FakeClock, append, batch, log_file, open_log

SIZE = len(batch(1))
DAY = 24 * 3600 * 1000


def log_with_segments(tmp_path, timestamps, **config):
    """One single-record batch per timestamp, two batches per segment."""
    config = LogConfig(segment_bytes=SIZE * 2, segment_ms=1_000 * DAY, **config)
    log = open_log(tmp_path / "t-0", config)
    for ts in timestamps:
        append(log, batch(1, timestamp_ms=ts))
    return log


def test_retention_by_time_deletes_expired_prefix_and_moves_log_start(tmp_path):
    now = 10 * DAY
    log = log_with_segments(
        tmp_path, [1 * DAY, 2 * DAY, 3 * DAY, 4 * DAY, 9 * DAY, 9 * DAY], retention_ms=5 * DAY
    )
    assert [s.base_offset for s in log.segments] == [0, 2, 4]
    assert log.delete_old_segments(now) == 2
    assert log.log_start_offset == 4
    assert [s.base_offset for s in log.segments] == [4]
    assert not log_file(log.directory, 0).exists()
    assert log.read(4, 10**6, 6).total_size == SIZE * 2
    log.close()
    reopened = UnifiedLog.open(log.directory, LogConfig(), log_start_offset=4)
    assert reopened.log_start_offset == 4
    reopened.close()


def test_retention_by_time_stops_at_first_unexpired_segment(tmp_path):
    log = log_with_segments(
        tmp_path, [1 * DAY, 9 * DAY, 1 * DAY, 1 * DAY, 9 * DAY], retention_ms=5 * DAY
    )
    assert log.delete_old_segments(10 * DAY) == 0  # the first segment holds a recent record
    log.close()


def test_active_segment_is_never_deleted(tmp_path):
    log = log_with_segments(tmp_path, [1, 2, 3], retention_ms=0, retention_bytes=0)
    assert log.delete_old_segments(100 * DAY) == 1
    assert log.delete_old_segments(100 * DAY) == 0
    assert [s.base_offset for s in log.segments] == [2]
    assert log.log_end_offset == 3
    log.close()


def test_retention_by_size_keeps_the_log_under_retention_bytes(tmp_path):
    log = log_with_segments(tmp_path, [0] * 9, retention_ms=-1, retention_bytes=SIZE * 5)
    assert log.size_in_bytes == SIZE * 9
    assert log.delete_old_segments(DAY) == 2  # 9 -> 5 batches, whole segments only
    assert log.size_in_bytes == SIZE * 5
    assert log.log_start_offset == 4
    assert log.delete_old_segments(DAY) == 0
    log.close()


def test_unlimited_retention_deletes_nothing(tmp_path):
    log = log_with_segments(tmp_path, [0] * 9, retention_ms=-1, retention_bytes=-1)
    assert log.delete_old_segments(100 * DAY) == 0
    log.close()


def test_compact_only_topics_are_not_trimmed_by_retention(tmp_path):
    log = log_with_segments(
        tmp_path, [0] * 5, retention_ms=0, retention_bytes=0, cleanup_policy="compact"
    )
    assert log.delete_old_segments(100 * DAY) == 0
    log.close()


def test_time_retention_uses_file_mtime_when_batches_have_no_timestamp(tmp_path):
    log = log_with_segments(tmp_path, [-1, -1, -1], retention_ms=DAY)
    clock = FakeClock(log.segments[0].largest_timestamp)
    assert log.delete_old_segments(clock.now + DAY) == 0
    assert log.delete_old_segments(clock.now + DAY + 10_000) == 1
    log.close()


def test_retention_after_reopen_uses_timestamps_from_the_time_index(tmp_path):
    log = log_with_segments(tmp_path, [1 * DAY, 2 * DAY, 9 * DAY], retention_ms=5 * DAY)
    log.close()
    reopened = UnifiedLog.open(log.directory, log.config, had_clean_shutdown=True)
    assert reopened.segments[0].largest_timestamp == 2 * DAY
    assert reopened.delete_old_segments(10 * DAY) == 1
    reopened.close()


def test_segments_below_checkpointed_log_start_are_deleted(tmp_path):
    log = log_with_segments(tmp_path, [0] * 6, retention_ms=-1)
    log.close()
    reopened = UnifiedLog.open(log.directory, log.config, log_start_offset=4)
    assert reopened.delete_old_segments(0) == 2
    assert [s.base_offset for s in reopened.segments] == [4]
    reopened.close()
