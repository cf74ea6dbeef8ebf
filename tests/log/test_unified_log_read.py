import pytest

from harness.wire.errors import ErrorCode
from harness.wire.records import decode_records
from reference_broker.log.errors import OffsetOutOfRange
from reference_broker.log.log_config import LogConfig
from reference_broker.log.topic_partition import TopicPartition
from reference_broker.log.unified_log import UnifiedLog
from tests.log.log_testing import append, batch, batch_with_timestamps, headers_of, open_log

SIZE = len(batch(2))


def filled(tmp_path, batches=10, *, segment_batches=4, index_interval=0):
    """A log of `batches` batches of 2 records (offsets 2i, 2i+1), `segment_batches` per segment."""
    config = LogConfig(segment_bytes=SIZE * segment_batches, index_interval_bytes=index_interval)
    log = open_log(tmp_path / "orders.v2-eu-3", config)
    for i in range(batches):
        append(log, batch(2, timestamp_ms=1_000 + 10 * i))
    return log


def offsets(fetched):
    return [h.base_offset for h in headers_of(fetched.read_bytes())]


def test_topic_partition_is_parsed_from_the_directory_name(tmp_path):
    log = filled(tmp_path, 1)
    assert log.topic_partition == TopicPartition("orders.v2-eu", 3)
    log.close()
    with pytest.raises(ValueError, match="partition directory"):
        UnifiedLog.open(tmp_path / "no_partition", LogConfig())


def test_read_everything_across_segments(tmp_path):
    log = filled(tmp_path)
    assert len(log.segments) == 3
    fetched = log.read(0, 10**6, log.log_end_offset)
    assert offsets(fetched) == list(range(0, 20, 2))
    assert fetched.total_size == SIZE * 10 == len(fetched.read_bytes())
    assert len(fetched.regions) == 3
    log.close()


def test_batch_holding_the_start_offset_is_included_whole(tmp_path):
    log = filled(tmp_path)
    assert offsets(log.read(5, 10**6, 20))[0] == 4
    assert offsets(log.read(9, 10**6, 20))[0] == 8  # first batch of the second segment
    log.close()


def test_high_watermark_is_never_crossed(tmp_path):
    log = filled(tmp_path)
    assert offsets(log.read(0, 10**6, 7)) == [0, 2, 4]  # batch 6..7 would reach offset 7
    assert offsets(log.read(0, 10**6, 8)) == [0, 2, 4, 6]
    assert offsets(log.read(0, 10**6, 9)) == [0, 2, 4, 6]
    assert log.read(6, 10**6, 7).total_size == 0
    assert log.read(20, 10**6, 20).regions == ()
    log.close()


def test_max_bytes_is_soft_for_the_first_batch_only(tmp_path):
    log = filled(tmp_path)
    assert offsets(log.read(0, SIZE * 3 - 1, 20)) == [0, 2]
    assert offsets(log.read(0, SIZE * 6, 20)) == [0, 2, 4, 6, 8, 10]
    assert offsets(log.read(0, 1, 20)) == [0]
    assert offsets(log.read(8, 0, 20)) == [8]
    assert log.read(0, 1, 20, min_one_batch=False).total_size == 0
    log.close()


def test_byte_limit_cut_uses_index_and_lands_on_batch_boundary(tmp_path):
    log = filled(tmp_path, 60, segment_batches=100, index_interval=SIZE * 3)
    for max_bytes in range(SIZE, SIZE * 50, 37):
        fetched = log.read(4, max_bytes, 120)
        assert fetched.total_size == (max_bytes // SIZE) * SIZE
        assert offsets(fetched)[0] == 4
    log.close()


def test_offsets_outside_the_log_are_out_of_range(tmp_path):
    log = filled(tmp_path, 2)
    with pytest.raises(OffsetOutOfRange) as info:
        log.read(5, 100, 10)
    assert info.value.error == ErrorCode.offset_out_of_range
    assert log.read(4, 100, 10).total_size == 0  # the log end itself is fine: nothing yet
    log.truncate_fully_and_start_at(10)
    with pytest.raises(OffsetOutOfRange):
        log.read(9, 100, 10)
    log.close()


def test_offset_zero_is_read_from_disk_after_reopen(tmp_path):
    log = filled(tmp_path)
    expected = log.read(0, 10**6, 20).read_bytes()
    directory = log.directory
    log.close()
    for clean in (True, False):
        reopened = UnifiedLog.open(directory, LogConfig(), had_clean_shutdown=clean)
        fetched = reopened.read(0, 10**6, 20)
        assert fetched.read_bytes() == expected
        assert decode_records(fetched.regions[0].read_bytes())[0].offset == 0
        reopened.close()


def test_regions_expose_a_descriptor_for_sendfile(tmp_path):
    log = filled(tmp_path, 1)
    (region,) = log.read(0, 10**6, 2).regions
    assert isinstance(region.file.fileno(), int)
    assert (region.position, region.size) == (0, SIZE)
    log.close()


def test_regions_stay_readable_after_retention_deletes_their_segment(tmp_path):
    log = filled(tmp_path)
    fetched = log.read(0, 10**6, 20)
    expected = fetched.read_bytes()
    log.update_config(log.config.with_overrides(retention_bytes=0))
    assert log.delete_old_segments(10**12) == 2
    assert log.log_start_offset == 16
    assert fetched.read_bytes() == expected
    log.close()


def test_fetch_offset_by_timestamp_batch_and_record_granularity(tmp_path):
    log = filled(tmp_path)  # batch i: offsets 2i, 2i+1, timestamp 1000 + 10 i
    assert log.fetch_offset_by_timestamp(0) == (0, 1_000)
    assert log.fetch_offset_by_timestamp(1_000) == (0, 1_000)
    assert log.fetch_offset_by_timestamp(1_001) == (2, 1_010)
    assert log.fetch_offset_by_timestamp(1_090) == (18, 1_090)
    assert log.fetch_offset_by_timestamp(1_091) is None
    append(log, batch_with_timestamps([2_000, 2_005, 2_003, 2_010]))
    assert log.fetch_offset_by_timestamp(2_004) == (21, 2_005)
    assert log.fetch_offset_by_timestamp(2_006) == (23, 2_010)
    log.close()


def test_fetch_offset_by_timestamp_decodes_gzip_batches(tmp_path):
    log = open_log(tmp_path / "t-0")
    append(log, batch(3, timestamp_ms=500, compression=1))
    append(log, batch(3, timestamp_ms=700, compression=1))
    assert log.fetch_offset_by_timestamp(600) == (3, 700)
    log.close()


def test_special_timestamps(tmp_path):
    log = filled(tmp_path, 3)
    log.truncate_fully_and_start_at(100)
    append(log, batch(2, timestamp_ms=50))
    append(log, batch_with_timestamps([10, 90, 20]))
    append(log, batch(1, timestamp_ms=60))
    assert log.fetch_offset_by_timestamp(-2) == (100, -1)
    assert log.fetch_offset_by_timestamp(-1) == (106, -1)
    assert log.fetch_offset_by_timestamp(-3) == (103, 90)  # KIP-734: the exact record
    assert log.max_timestamp_offset() == (103, 90)
    log.close()


def test_max_timestamp_offset_after_reopen_and_on_empty_log(tmp_path):
    log = filled(tmp_path)
    log.close()
    reopened = UnifiedLog.open(log.directory, LogConfig(), had_clean_shutdown=True)
    assert reopened.max_timestamp_offset() == (18, 1_090)
    assert reopened.fetch_offset_by_timestamp(1_055) == (12, 1_060)
    reopened.close()
    empty = open_log(tmp_path / "e-0")
    assert empty.max_timestamp_offset() is None
    assert empty.fetch_offset_by_timestamp(0) is None
    empty.close()
