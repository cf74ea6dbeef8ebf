import os

import pytest

from harness.wire.records import patch_base_offset, read_header
from reference_broker.log.file_records import FileRegion
from reference_broker.log.log_config import LogConfig
from reference_broker.log.segment import LogSegment
from tests.log.log_testing import batch

CONFIG = LogConfig(index_interval_bytes=200)
BASE = 50


def fill(directory, batches=20, records=3, *, base=BASE, config=CONFIG, now_ms=0):
    """A segment at `base` holding `batches` batches; returns it and the bytes of each batch."""
    segment = LogSegment.create(directory, base, config, now_ms)
    written = []
    offset = base
    for i in range(batches):
        data = batch(records, value=b"x" * (10 + i), timestamp_ms=1_000 + i)
        patch_base_offset(data, 0, offset)
        segment.append_batch(data, offset, offset + records - 1, 1_000 + i)
        written.append(bytes(data))
        offset += records
    return segment, written


def reopen(directory, base=BASE, config=CONFIG):
    return LogSegment.open(directory, base, config, now_ms=0)


def test_append_tracks_offsets_size_timestamps_and_sparse_index(tmp_path):
    segment, written = fill(tmp_path)
    assert segment.next_offset == BASE + 60
    assert segment.size == sum(map(len, written))
    assert segment.max_timestamp == 1_019
    assert segment.offset_of_max_timestamp == BASE + 57
    # sparse: about one entry per 200 bytes, never one for the first batch
    assert 0 < segment.offset_index.entries < len(written)
    assert segment.offset_index.lookup(BASE) == (BASE, 0)
    segment.close()


def test_translate_offset_finds_the_batch_holding_the_offset(tmp_path):
    segment, written = fill(tmp_path)
    for offset in range(BASE, BASE + 60):
        position, header = segment.translate_offset(offset)
        n = (offset - BASE) // 3
        assert position == sum(map(len, written[:n]))
        assert header.base_offset == BASE + 3 * n
    assert segment.translate_offset(BASE + 60) is None
    segment.close()


def test_read_returns_whole_batches_within_limits(tmp_path):
    segment, written = fill(tmp_path)
    sizes = list(map(len, written))
    # starting mid-batch returns the whole batch holding the offset
    found = segment.read(BASE + 4, max_size=10**6, max_position=segment.size, min_one_batch=True)
    assert found.position == sizes[0]
    assert found.size == segment.size - sizes[0]
    assert found.reached_end
    # the byte limit cuts at a batch boundary
    found = segment.read(
        BASE, max_size=sizes[0] + sizes[1] + 5, max_position=segment.size, min_one_batch=True
    )
    assert (found.position, found.size, found.reached_end) == (0, sizes[0] + sizes[1], False)
    # one batch even when it is bigger than the limit, unless told otherwise
    found = segment.read(BASE, max_size=1, max_position=segment.size, min_one_batch=True)
    assert found.size == sizes[0]
    found = segment.read(BASE, max_size=1, max_position=segment.size, min_one_batch=False)
    assert found.size == 0
    # max_position (the high watermark) is a hard limit
    hw_position = segment.position_of(BASE + 6)
    found = segment.read(BASE, max_size=10**6, max_position=hw_position, min_one_batch=True)
    assert found.size == sizes[0] + sizes[1]
    assert segment.read(BASE + 6, 10**6, hw_position, True).size == 0
    assert segment.read(BASE + 60, 10**6, segment.size, True) is None
    segment.close()


def test_region_bytes_match_what_was_appended(tmp_path):
    segment, written = fill(tmp_path)
    found = segment.read(BASE + 30, 10**6, segment.size, True)
    assert FileRegion(segment.file, found.position, found.size).read_bytes() == b"".join(
        written[10:]
    )
    segment.close()


def test_reopened_trusted_segment_keeps_state_without_recovery(tmp_path):
    segment, written = fill(tmp_path)
    segment.seal()
    segment.flush()
    segment.close()
    reopened = reopen(tmp_path)
    assert reopened.load_trusted() == 0
    assert reopened.next_offset == BASE + 60
    assert reopened.max_timestamp == 1_019
    assert reopened.read(BASE, 10**6, reopened.size, True).size == sum(map(len, written))
    reopened.close()


@pytest.mark.parametrize("damage", ["missing", "partial", "garbage", "truncated", "time_missing"])
def test_damaged_index_is_rebuilt_from_the_log(tmp_path, damage):
    segment, written = fill(tmp_path, batches=40)
    segment.close()
    original_index = (tmp_path / f"{BASE:020d}.index").read_bytes()
    index = tmp_path / f"{BASE:020d}.index"
    if damage == "missing":
        index.unlink()
    elif damage == "partial":
        index.write_bytes(original_index[:-3])
    elif damage == "garbage":
        index.write_bytes(os.urandom(len(original_index)))
    elif damage == "truncated":
        index.write_bytes(original_index[:8])
    else:
        (tmp_path / f"{BASE:020d}.timeindex").unlink()
    reopened = reopen(tmp_path)
    assert reopened.load_trusted() == 0
    assert (tmp_path / f"{BASE:020d}.index").read_bytes() == original_index
    assert reopened.next_offset == BASE + 120
    for offset in (BASE, BASE + 61, BASE + 119):
        _, header = reopened.translate_offset(offset)
        assert header.base_offset <= offset <= header.last_offset
    reopened.close()


def test_recover_intact_segment_changes_nothing(tmp_path):
    segment, written = fill(tmp_path)
    segment.close()
    reopened = reopen(tmp_path)
    assert reopened.recover() == 0
    assert reopened.next_offset == BASE + 60
    reopened.close()


def test_recover_truncates_torn_last_batch(tmp_path):
    segment, written = fill(tmp_path)
    segment.close()
    log = tmp_path / f"{BASE:020d}.log"
    intact = sum(map(len, written[:-1]))
    os.truncate(log, intact + len(written[-1]) // 2)
    reopened = reopen(tmp_path)
    assert reopened.recover() == len(written[-1]) // 2
    assert reopened.size == intact == os.path.getsize(log)
    assert reopened.next_offset == BASE + 57
    reopened.close()


@pytest.mark.parametrize("garbage", [b"\x00" * 7, b"\xff" * 100, b"\x00" * 200])
def test_recover_truncates_garbage_tail(tmp_path, garbage):
    segment, written = fill(tmp_path)
    segment.close()
    log = tmp_path / f"{BASE:020d}.log"
    with open(log, "ab") as out:
        out.write(garbage)
    reopened = reopen(tmp_path)
    assert reopened.recover() == len(garbage)
    assert reopened.next_offset == BASE + 60
    reopened.close()


def test_recover_truncates_batch_with_bad_crc(tmp_path):
    segment, written = fill(tmp_path)
    segment.close()
    log = tmp_path / f"{BASE:020d}.log"
    data = bytearray(log.read_bytes())
    data[-1] ^= 0xFF  # a record byte: only the CRC notices
    log.write_bytes(data)
    reopened = reopen(tmp_path)
    assert reopened.recover() == len(written[-1])
    assert reopened.next_offset == BASE + 57
    reopened.close()


def test_recover_stops_at_offsets_going_backwards(tmp_path):
    segment, written = fill(tmp_path, batches=3)
    duplicate = bytearray(written[0])
    segment.append_batch(duplicate, BASE, BASE + 2, 1_000)  # same offsets again: corruption
    segment.close()
    reopened = reopen(tmp_path)
    assert reopened.recover() == len(duplicate)
    reopened.close()


def test_truncate_to_cuts_whole_batches_and_rebuilds_state(tmp_path):
    segment, written = fill(tmp_path, batches=40)
    removed = segment.truncate_to(BASE + 61)  # inside the batch 60..62: it goes whole
    assert removed == sum(map(len, written[20:]))
    assert segment.next_offset == BASE + 60
    assert segment.max_timestamp == 1_019
    assert segment.translate_offset(BASE + 60) is None
    data = batch(1, timestamp_ms=5)
    patch_base_offset(data, 0, BASE + 60)
    segment.append_batch(data, BASE + 60, BASE + 60, 5)
    assert segment.translate_offset(BASE + 60)[1].base_offset == BASE + 60
    segment.close()
    reopened = reopen(tmp_path)
    assert reopened.recover() == 0
    assert reopened.next_offset == BASE + 61
    reopened.close()


def test_should_roll_rules(tmp_path):
    config = LogConfig(
        segment_bytes=1000, segment_ms=100, index_interval_bytes=0, max_index_size=24
    )
    segment = LogSegment.create(tmp_path, 0, config, now_ms=0)
    assert not segment.should_roll(config, 5000, 0, 0, now_ms=10**9)  # never an empty one
    data = batch(1, timestamp_ms=1_000)
    segment.append_batch(data, 0, 0, 1_000)
    size = len(data)
    assert segment.should_roll(config, 1001 - size, 1_000, 1, now_ms=0)  # too big
    assert not segment.should_roll(config, 10, 1_100, 1, now_ms=0)
    assert segment.should_roll(config, 10, 1_101, 1, now_ms=0)  # record time passed segment.ms
    assert segment.should_roll(config, 10, 1_000, 2**31, now_ms=0)  # relative offset overflow
    for offset in (1, 2):
        segment.append_batch(batch(1), offset, offset, 1_000)
        assert not segment.should_roll(config, 10, 1_000, offset + 1, now_ms=0)
    segment.append_batch(batch(1), 3, 3, 1_000)
    assert segment.should_roll(config, 10, 1_000, 4, now_ms=0)  # offset index full: 3 x 8 bytes
    segment.close()


def test_time_roll_uses_wall_clock_when_batches_have_no_timestamp(tmp_path):
    config = LogConfig(segment_ms=100)
    segment = LogSegment.create(tmp_path, 0, config, now_ms=1_000)
    segment.append_batch(batch(1, timestamp_ms=-1), 0, 0, -1)
    assert not segment.should_roll(config, 10, -1, 1, now_ms=1_100)
    assert segment.should_roll(config, 10, -1, 1, now_ms=1_101)
    segment.close()


def test_deleted_segment_stays_readable_through_existing_regions(tmp_path):
    segment, written = fill(tmp_path, batches=3)
    region = FileRegion(segment.file, 0, segment.size)
    segment.delete()
    assert not (tmp_path / f"{BASE:020d}.log").exists()
    assert region.read_bytes() == b"".join(written)
    fd = region.file.fileno()
    del segment
    os.fstat(fd)  # still open: the region holds the file
    file = region.file
    del region
    file.close()
    assert file.closed
    with pytest.raises(ValueError):
        file.fileno()


def test_find_by_timestamp_uses_batch_max_timestamp(tmp_path):
    segment, written = fill(tmp_path, batches=40)
    position, header = segment.find_by_timestamp(1_025, start_offset=BASE)
    assert header.max_timestamp == 1_025
    assert read_header(segment.read_batch(position, 61)).base_offset == header.base_offset
    assert segment.find_by_timestamp(5_000, BASE) is None
    assert segment.find_by_timestamp(0, BASE + 10)[1].base_offset == BASE + 9
    segment.close()
