import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.wire import records
from harness.wire.errors import ErrorCode
from harness.wire.records import InvalidBatch, build_batch, decode_records, validate_batches


def test_build_validate_decode_round_trip():
    batch = build_batch([(b"k1", b"v1"), (None, b"v2")], timestamp_ms=1_700_000_000_123)
    (header,) = validate_batches(batch, 1 << 20)
    assert header.records_count == 2
    assert header.last_offset_delta == 1
    decoded = decode_records(batch)
    assert [(r.offset, r.key, r.value) for r in decoded] == [(0, b"k1", b"v1"), (1, None, b"v2")]
    assert decoded[0].timestamp == 1_700_000_000_123  # milliseconds survive, unlike kio's helper


def test_gzip_batch_validates_without_decompression_and_decodes():
    batch = build_batch([(None, b"x" * 100)] * 10, compression=1)
    (header,) = validate_batches(batch, 1 << 20)
    assert header.compression == 1
    assert len(decode_records(batch)) == 10


def test_patches_keep_crc_valid_and_records_untouched():
    batch = bytearray(build_batch([(b"k", b"v")] * 3, timestamp_ms=5))
    original_records = bytes(batch[records.HEADER_SIZE:])
    records.patch_base_offset(batch, 0, 42)
    records.patch_leader_epoch(batch, 0, 7)
    validate_batches(bytes(batch), 1 << 20)  # CRC does not cover offset and epoch
    records.patch_log_append_time(batch, 0, 999)
    (header,) = validate_batches(bytes(batch), 1 << 20)
    assert header.base_offset == 42 and header.partition_leader_epoch == 7
    assert header.is_log_append_time and header.max_timestamp == 999
    assert bytes(batch[records.HEADER_SIZE:]) == original_records
    assert [r.offset for r in decode_records(batch)] == [42, 43, 44]
    assert {r.timestamp for r in decode_records(batch)} == {999}


def _error(data: bytes, limit: int = 1 << 20) -> ErrorCode:
    with pytest.raises(InvalidBatch) as info:
        validate_batches(data, limit)
    return info.value.error


def test_corrupt_crc():
    batch = bytearray(build_batch([(b"k", b"value")]))
    batch[-1] ^= 0xFF
    assert _error(bytes(batch)) == ErrorCode.corrupt_message


def test_truncated_and_overlong_batches():
    batch = build_batch([(b"k", b"value")])
    assert _error(batch[:30]) == ErrorCode.corrupt_message
    assert _error(batch[:-1]) == ErrorCode.corrupt_message


def test_wrong_magic():
    batch = bytearray(build_batch([(b"k", b"v")]))
    batch[16] = 1
    assert _error(bytes(batch)) == ErrorCode.unsupported_for_message_format
    batch[16] = 9
    assert _error(bytes(batch)) == ErrorCode.corrupt_message


def test_too_large():
    batch = build_batch([(None, b"x" * 1000)])
    assert _error(batch, limit=500) == ErrorCode.message_too_large


def test_count_mismatch_is_invalid_record():
    batch = bytearray(build_batch([(b"k", b"v")] * 2))
    struct.pack_into(">i", batch, 57, 5)  # records_count lies
    struct.pack_into(">I", batch, 17, records.compute_crc(batch, 0, len(batch)))
    assert _error(bytes(batch)) == ErrorCode.invalid_record


def test_two_batches_in_one_partition_is_invalid_record():
    batch = build_batch([(b"k", b"v")])
    assert _error(batch + batch) == ErrorCode.invalid_record


def test_empty_is_invalid_record():
    assert _error(b"") == ErrorCode.invalid_record


@given(st.lists(st.tuples(st.none() | st.binary(max_size=20), st.binary(max_size=50)),
                min_size=1, max_size=20), st.integers(0, 2**40))
def test_round_trip_property(values, ts):
    batch = build_batch(values, timestamp_ms=ts)
    validate_batches(batch, 1 << 20)
    decoded = decode_records(batch)
    assert [(r.key, r.value) for r in decoded] == values


@given(st.binary(max_size=200))
def test_garbage_never_crashes_validation(data):
    with contextlib.suppress(InvalidBatch):
        validate_batches(data, 1 << 20)


def test_iter_headers_stops_at_partial_tail():
    a = build_batch([(b"a", b"1")])
    b = build_batch([(b"b", b"2")])
    headers = list(records.iter_headers(a + b + b[:20]))
    assert [h.position for h in headers] == [0, len(a)]
