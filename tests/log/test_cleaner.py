"""Compaction: the latest value per key survives at its offset; old tombstones go."""

from dataclasses import replace

from harness.wire.control_records import ControlType, EndTxnMarker
from harness.wire.records import build_batch, decode_records, read_header
from reference_broker.log.cleaner import CleanResult, clean, clean_logs, dirty_ratio
from reference_broker.log.log_config import LogConfig

from .log_testing import FakeClock, append, log_file, open_log

COMPACT = LogConfig(cleanup_policy="compact", delete_retention_ms=1000)


def write(log, pairs, timestamp_ms=10_000, **kw):
    result = append(log, bytearray(build_batch(pairs, timestamp_ms=timestamp_ms, **kw)))
    log.roll()
    return result


def contents(log):
    out = []
    offset = log.log_start_offset
    data = log.read(offset, 1 << 20, log.log_end_offset).read_bytes()
    pos = 0
    while pos < len(data):
        header = read_header(data, pos)
        out += [(r.offset, r.key, r.value) for r in decode_records(data[pos:pos + header.size])]
        pos += header.size
    return out


def test_latest_value_per_key_survives_at_its_offset(tmp_path):
    log = open_log(tmp_path / "t-0", COMPACT, now_ms=FakeClock())
    write(log, [(b"a", b"1"), (b"b", b"1")])
    write(log, [(b"a", b"2"), (b"c", b"1")])
    write(log, [(b"b", b"2")])
    append(log, bytearray(build_batch([(b"a", b"active")], timestamp_ms=10_000)))
    end = log.log_end_offset
    result = clean(log, now_ms=10_000)
    assert (result.records_removed, result.segments_rewritten) == (2, 1)
    assert contents(log) == [(2, b"a", b"2"), (3, b"c", b"1"), (4, b"b", b"2"),
                             (5, b"a", b"active")]
    assert log.log_end_offset == end and log.log_start_offset == 0
    # Idempotent: a second pass finds nothing to do.
    assert clean(log, now_ms=10_000).segments_rewritten == 0


def test_tombstones_removed_only_after_delete_retention(tmp_path):
    log = open_log(tmp_path / "t-0", COMPACT, now_ms=FakeClock())
    write(log, [(b"a", b"1"), (b"b", b"1")])
    write(log, [(b"a", None)], timestamp_ms=10_000)
    write(log, [(b"z", b"keep")])
    clean(log, now_ms=10_500)
    assert contents(log) == [(1, b"b", b"1"), (2, b"a", None), (3, b"z", b"keep")]
    # A tombstone goes at the next cleaning past the horizon, and a cleaning needs dirt.
    write(log, [(b"y", b"1" * 200)])
    result = clean(log, now_ms=11_001)
    assert result.tombstones_removed == 1
    assert contents(log) == [(1, b"b", b"1"), (3, b"z", b"keep"), (4, b"y", b"1" * 200)]


def test_a_log_is_cleaned_only_when_more_than_its_min_dirty_ratio_is_dirty(tmp_path):
    """Kafka's trigger: the bytes past the cleaner's checkpoint over all cleanable bytes must
    exceed min.cleanable.dirty.ratio (0.5 by default)."""
    log = open_log(tmp_path / "t-0", COMPACT, now_ms=FakeClock())
    for value in (b"1", b"2", b"3"):
        write(log, [(b"k", value * 100)])
    assert dirty_ratio(log) == 1.0
    assert clean(log, now_ms=10_000).records_removed == 2
    assert dirty_ratio(log) == 0.0
    write(log, [(b"k", b"4")])  # small: dirty, but well under half of the cleanable bytes
    assert 0.0 < dirty_ratio(log) < 0.5
    assert clean(log, now_ms=10_000) == CleanResult()
    assert [v for _, _, v in contents(log)] == [b"3" * 100, b"4"]
    log.update_config(replace(COMPACT, min_cleanable_dirty_ratio=0.1))
    assert clean(log, now_ms=10_000).records_removed == 1
    assert [v for _, _, v in contents(log)] == [b"4"]


def test_a_compacted_log_reloads_and_keeps_its_producer_fields(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory, COMPACT, now_ms=FakeClock())
    write(log, [(b"a", b"1"), (b"b", b"1"), (b"a", b"2")], producer_id=7, producer_epoch=0,
          base_sequence=0)
    write(log, [(b"c", b"1")])
    clean(log, now_ms=10_000)
    header = read_header(log_file(directory, 0).read_bytes())
    assert (header.base_offset, header.last_offset, header.records_count) == (0, 2, 2)
    assert (header.producer_id, header.base_sequence) == (7, 0)
    before = contents(log)
    log.close()
    assert not list(directory.glob("*.cleaned"))
    reopened = open_log(directory, COMPACT, had_clean_shutdown=False)
    assert contents(reopened) == before == [(1, b"b", b"1"), (2, b"a", b"2"), (3, b"c", b"1")]
    reopened.close()


def test_emptied_segments_disappear_and_reads_skip_the_gap(tmp_path):
    log = open_log(tmp_path / "t-0", COMPACT, now_ms=FakeClock())
    write(log, [(b"a", b"1")])
    write(log, [(b"a", b"2")])
    write(log, [(b"a", b"3")])
    clean(log, now_ms=10_000)
    assert [s.base_offset for s in log.segments] == [2, 3]
    assert log.log_start_offset == 0
    assert contents(log) == [(2, b"a", b"3")]


def test_delete_policy_logs_are_left_alone(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(), now_ms=FakeClock())
    write(log, [(b"a", b"1")])
    write(log, [(b"a", b"2")])
    assert clean_logs([log], now_ms=10_000) == 0
    assert len(contents(log)) == 2


def test_leftover_cleaned_files_are_discarded_on_load(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory, COMPACT, now_ms=FakeClock())
    write(log, [(b"a", b"1")])
    log.close()
    (directory / f"{0:020d}.log.cleaned").write_bytes(b"half written")
    reopened = open_log(directory, COMPACT)
    assert contents(reopened) == [(0, b"a", b"1")]
    assert not list(directory.glob("*.cleaned"))
    reopened.close()


def test_an_aborted_write_never_supersedes_a_committed_one(tmp_path):
    """Kafka's cleaner drops aborted transactional batches and keeps their keys out of the
    map: were the aborted value the latest, compaction would delete the committed one."""
    log = open_log(tmp_path / "t-0", COMPACT, now_ms=FakeClock())
    write(log, [(b"k", b"committed")])  # 0
    write(log, [(b"k", b"aborted")], producer_id=7, producer_epoch=0, base_sequence=0,
          transactional=True)  # 1
    log.append_marker_as_leader(EndTxnMarker(ControlType.ABORT, 0), producer_id=7,
                                producer_epoch=0, leader_epoch=0)  # 2
    log.roll()
    append(log, bytearray(build_batch([(b"other", b"x")], timestamp_ms=10_000)))
    result = clean(log, now_ms=10_000)
    assert result.records_removed == 1
    assert [(o, k, v) for o, k, v in contents(log) if k != b"\x00\x00\x00\x00"] == \
        [(0, b"k", b"committed"), (3, b"other", b"x")]
    assert log.collect_aborted_transactions(0, 4)[0].producer_id == 7  # the index stays


def test_nothing_from_an_open_transaction_on_is_cleaned(tmp_path):
    log = open_log(tmp_path / "t-0", COMPACT, now_ms=FakeClock())
    write(log, [(b"k", b"1")])  # 0
    write(log, [(b"t", b"open")], producer_id=7, producer_epoch=0, base_sequence=0,
          transactional=True)  # 1: open, so its segment and every later one wait
    write(log, [(b"k", b"2")])  # 2
    append(log, bytearray(build_batch([(b"k", b"3")], timestamp_ms=10_000)))
    assert clean(log, now_ms=10_000).records_removed == 0
    log.append_marker_as_leader(EndTxnMarker(ControlType.COMMIT, 0), producer_id=7,
                                producer_epoch=0, leader_epoch=0)
    log.roll()
    append(log, bytearray(build_batch([(b"z", b"1")], timestamp_ms=10_000)))
    assert clean(log, now_ms=10_000).records_removed == 2  # k=1 and k=2 go, k=3 stays
