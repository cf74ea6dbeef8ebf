"""The hand-written Produce response writer writes exactly what kio's writer writes.

The broker answers every Produce v3-v11 with `encode_produce_response`; these tests hold its
frames equal to `protocol.encode_response` (kio) byte for byte for every version, over bodies
of the shape the broker builds (several topics and partitions, every error code, LogAppendTime
or none, record errors and messages, non-ASCII names), and check that what it does not cover
is handed back to kio rather than written wrongly.
"""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.wire import protocol
from harness.wire.errors import ErrorCode
from harness.wire.produce_response import (
    MAX_VERSION,
    MIN_VERSION,
    encode_produce_response,
)

PRODUCE = 0
VERSIONS = range(MIN_VERSION, MAX_VERSION + 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
# Milliseconds kio turns into datetimes and back: -1 (none) or realistic wall-clock times.
APPEND_TIME = st.one_of(st.just(-1), st.integers(0, 4_102_444_800_000))
TEXT = st.text(max_size=40)


def _partition() -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries(
        {"index": INT32, "error_code": st.sampled_from(list(ErrorCode)), "base_offset": INT64},
        optional={
            "log_append_time": APPEND_TIME,
            "log_start_offset": INT64,
            "error_message": st.none() | TEXT,
            "record_errors": st.lists(st.fixed_dictionaries(
                {"batch_index": INT32},
                optional={"batch_index_error_message": st.none() | TEXT}), max_size=3),
        })


BODIES = st.fixed_dictionaries(
    {"responses": st.lists(st.fixed_dictionaries({
        "name": st.text(min_size=1, max_size=30),
        "partition_responses": st.lists(_partition(), max_size=4),
    }, optional={"topic_id": st.uuids()}), max_size=4)},
    optional={"throttle_time": st.integers(0, 2**31 - 1)},
)


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(VERSIONS), correlation_id=INT32, body=BODIES)
def test_every_version_matches_kios_writer_byte_for_byte(version, correlation_id, body):
    expected = protocol.encode_response(PRODUCE, version, correlation_id, body)
    assert encode_produce_response(version, correlation_id, body) == expected


def test_the_brokers_usual_answer_decodes_to_what_was_sent():
    body = {"responses": [{"name": "orders", "topic_id": None, "partition_responses": [
        {"index": 2, "error_code": ErrorCode.none, "base_offset": 41, "log_append_time": -1,
         "log_start_offset": 0, "error_message": None, "record_errors": []}]}],
        "throttle_time": 0}
    for version in VERSIONS:
        frame = encode_produce_response(version, 99, body)
        assert frame is not None
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        correlation_id, decoded = protocol.decode_response(PRODUCE, version, frame[4:])
        partition = decoded.responses[0].partition_responses[0]
        assert (correlation_id, decoded.responses[0].name) == (99, "orders")
        assert (partition.index, partition.base_offset) == (2, 41)
        assert partition.error_code is ErrorCode.none


@pytest.mark.parametrize("version, body", [
    (2, {"responses": [], "throttle_time": 0}),  # kio has no v0-v2
    (12, {"responses": [], "throttle_time": 0}),  # v12+ is not this writer's
    (9, {"responses": [], "throttle_time": 0, "node_endpoints": []}),
    (9, {"responses": [], "throttle_time": datetime.timedelta(milliseconds=5)}),
    (9, {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 0,
         "current_leader": {"leader_id": 1, "leader_epoch": 3}}]}]}),
    (9, {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": "NOT_LEADER_OR_FOLLOWER", "base_offset": -1}]}]}),
    (9, {"responses": [{"name": None, "partition_responses": []}]}),
])
def test_what_it_does_not_cover_is_left_to_kio(version, body):
    assert encode_produce_response(version, 1, body) is None
