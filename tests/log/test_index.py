import struct

import pytest

from reference_broker.log.errors import CorruptIndex
from reference_broker.log.index import OffsetIndex, TimeIndex


def offset_index(tmp_path, *, create=True, base=100, max_size=1024):
    return OffsetIndex(tmp_path / "x.index", base, max_size, create=create)


def time_index(tmp_path, *, create=True, base=100, max_size=1024):
    return TimeIndex(tmp_path / "x.timeindex", base, max_size, create=create)


def test_offset_lookup_finds_largest_entry_at_or_below_target(tmp_path):
    index = offset_index(tmp_path)
    for offset, position in [(110, 400), (120, 900), (135, 1500)]:
        index.append(offset, position)
    assert index.lookup(100) == (100, 0)  # before the first entry: the segment start
    assert index.lookup(109) == (100, 0)
    assert index.lookup(110) == (110, 400)
    assert index.lookup(134) == (120, 900)
    assert index.lookup(10_000) == (135, 1500)
    assert index.lookup_by_position(899) == (110, 400)
    assert index.lookup_by_position(900) == (120, 900)
    assert index.lookup_by_position(10) == (100, 0)
    index.close()


def test_offset_index_is_written_in_kafka_layout_and_reloads(tmp_path):
    index = offset_index(tmp_path)
    index.append(110, 400)
    index.append(120, 900)
    index.flush()
    assert (tmp_path / "x.index").read_bytes() == struct.pack(">iiii", 10, 400, 20, 900)
    index.append(130, 1000)
    index.close()  # close writes buffered entries too
    reopened = offset_index(tmp_path, create=False)
    assert reopened.entries == 3
    assert reopened.last_entry() == (130, 1000)
    reopened.sanity_check(log_size=2000)
    reopened.close()


def test_offset_index_truncation_drops_entries_on_disk_and_in_buffer(tmp_path):
    index = offset_index(tmp_path)
    for i in range(1, 6):
        index.append(100 + i * 10, i * 100)
    index.flush()
    index.append(160, 600)
    index.truncate_to_position(300)  # the batches at 300 and later are cut off
    assert index.entries == 2
    assert index.last_entry() == (120, 200)
    index.append(125, 250)
    index.close()
    reopened = offset_index(tmp_path, create=False)
    assert [reopened.entry(i) for i in range(reopened.entries)] == [
        (110, 100),
        (120, 200),
        (125, 250),
    ]
    reopened.close()


def test_offset_index_full_at_max_size(tmp_path):
    index = offset_index(tmp_path, max_size=24)
    for i in range(3):
        assert not index.is_full
        index.append(101 + i, 10 * (i + 1))
    assert index.is_full
    index.close()


def test_offset_index_with_partial_entry_is_corrupt(tmp_path):
    (tmp_path / "x.index").write_bytes(struct.pack(">ii", 1, 10) + b"\x00\x01\x02")
    with pytest.raises(CorruptIndex, match="multiple of 8"):
        offset_index(tmp_path, create=False)


@pytest.mark.parametrize(
    "entries",
    [
        [(5, 100), (4, 200)],  # offsets go backwards
        [(5, 100), (6, 100)],  # positions do not increase
        [(5, 100), (6, 5000)],  # points past the end of the log
        [(-1, 100)],  # below the base offset
    ],
)
def test_offset_index_sanity_check_rejects_bad_entries(tmp_path, entries):
    (tmp_path / "x.index").write_bytes(b"".join(struct.pack(">ii", *e) for e in entries))
    index = offset_index(tmp_path, create=False)
    with pytest.raises(CorruptIndex):
        index.sanity_check(log_size=1000)
    index.close()


def test_time_index_appends_only_growing_timestamps(tmp_path):
    index = time_index(tmp_path)
    index.maybe_append(1000, 105)
    index.maybe_append(1000, 110)  # same max timestamp: nothing new to say
    index.maybe_append(900, 111)
    index.maybe_append(2000, 120)
    assert index.entries == 2
    assert index.lookup(999) == (-1, 100)
    assert index.lookup(1000) == (1000, 105)
    assert index.lookup(1999) == (1000, 105)
    assert index.lookup(5000) == (2000, 120)
    assert index.last_entry() == (2000, 120)
    index.close()
    reopened = time_index(tmp_path, create=False)
    assert reopened.last_entry() == (2000, 120)
    reopened.sanity_check(next_offset=121)
    with pytest.raises(CorruptIndex):
        reopened.sanity_check(next_offset=120)  # entry names an offset past the segment
    reopened.truncate_to_offset(120)
    assert reopened.last_entry() == (1000, 105)
    reopened.close()


def test_time_index_sanity_check_rejects_decreasing_timestamps(tmp_path):
    (tmp_path / "x.timeindex").write_bytes(struct.pack(">qiqi", 50, 1, 40, 2))
    index = time_index(tmp_path, create=False)
    with pytest.raises(CorruptIndex):
        index.sanity_check(next_offset=1000)
    index.close()


def test_time_index_with_partial_entry_is_corrupt(tmp_path):
    (tmp_path / "x.timeindex").write_bytes(b"\x00" * 13)
    with pytest.raises(CorruptIndex):
        time_index(tmp_path, create=False)


def test_deleted_index_removes_its_file(tmp_path):
    index = offset_index(tmp_path)
    index.append(101, 10)
    index.delete()
    assert not (tmp_path / "x.index").exists()
