import pytest

from harness.wire import protocol
from harness.wire.framing import FrameDecoder
from harness.wire.protocol import ProtocolError
from harness.wire.records import build_batch


def _produce_frame(version: int = 9) -> bytes:
    body = {"acks": 1, "timeout": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": build_batch([(b"k", b"v")])}]}]}
    return protocol.encode_request(api_key=0, api_version=version, correlation_id=7, body=body)


@pytest.mark.parametrize("version", [3, 8, 9, 12])
def test_request_round_trip_across_header_versions(version):
    frame = _produce_frame(version)[4:]
    request = protocol.decode_request(frame)
    assert (request.api_key, request.api_version, request.correlation_id) == (0, version, 7)
    assert request.client_id == "kafka-harness"
    assert request.body.topic_data[0].name == "t"


def test_unknown_tagged_fields_are_ignored():
    frame = _produce_frame(9)[4:]
    assert frame[-1] == 0  # empty top-level tagged fields
    with_tag = frame[:-1] + bytes([1, 9, 3]) + b"xyz"
    assert protocol.decode_request(with_tag).body == protocol.decode_request(frame).body


def test_unknown_tag_inside_nested_struct_is_ignored():
    frame = _produce_frame(9)[4:]
    # The partition's tagged fields sit right after its records, then the topic's, then top.
    assert frame[-3:] == b"\x00\x00\x00"
    nested = frame[:-3] + bytes([1, 4, 1]) + b"q" + b"\x00\x00"
    assert protocol.decode_request(nested).body == protocol.decode_request(frame).body


@pytest.mark.parametrize("frame,reason", [
    (b"", "truncated request header"),
    (b"\x00\x63\x00\x00\x00\x00\x00\x01", "unknown api key 99"),
    (b"\x00\x00\x00\x63\x00\x00\x00\x01\x00\x00", "unsupported version 99"),
])
def test_bad_frames_name_the_reason(frame, reason):
    with pytest.raises(ProtocolError, match=reason):
        protocol.decode_request(frame)


def test_truncated_body_is_an_error_but_trailing_bytes_are_ignored():
    frame = _produce_frame()[4:]
    with pytest.raises(ProtocolError, match="malformed produce v9"):
        protocol.decode_request(frame[:25])
    # Kafka ignores bytes after the body; librdkafka relies on it for Metadata v13.
    assert protocol.decode_request(frame + b"\x01\x00\x00").body.acks == 1


def test_response_header_v0_for_api_versions_and_v1_for_flexible():
    api_versions = protocol.encode_response(18, 3, 5, {"error_code": 0, "api_keys": [],
                                                        "throttle_time": 0})
    # size, correlation id, then directly the error code (no tagged-field byte).
    assert api_versions[4:8] == b"\x00\x00\x00\x05" and api_versions[8:10] == b"\x00\x00"
    metadata = protocol.encode_response(3, 12, 5, {"brokers": [], "topics": []})
    assert metadata[8] == 0  # empty tagged fields of response header v1
    correlation, body = protocol.decode_response(3, 12, metadata[4:])
    assert correlation == 5 and body.topics == ()


def test_build_fills_version_specific_fields_and_converts_scalars():
    cls = protocol.response_class(0, 9)
    body = protocol.build(cls, {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": "NOT_LEADER_OR_FOLLOWER", "log_append_time": -1}]}],
        "throttle_time": 0, "node_endpoints": []})  # v10+: dropped for v9
    part = body.responses[0].partition_responses[0]
    assert part.error_code.value == 6
    assert part.log_append_time is None
    assert protocol.to_plain(body)["responses"][0]["partition_responses"][0]["error_code"] == 6


def test_modelled_versions_match_kio():
    assert protocol.modelled_versions(18) == (0, 1, 2, 3, 4)
    assert protocol.modelled_versions(1)[0] == 4


@pytest.mark.parametrize("api_key", sorted(protocol._API_NAMES))
def test_modelled_versions_read_from_the_index_are_the_versions_that_import(api_key):
    """modelled_versions reads kio's index instead of importing every version's types: it
    must name exactly the versions whose request and response both load, over a range wider
    than any API's."""
    importable = tuple(
        v for v in range(0, 64)
        if protocol.request_class(api_key, v) is not None
        and protocol.response_class(api_key, v) is not None
    )
    assert importable, protocol.api_name(api_key)
    assert protocol.modelled_versions(api_key) == importable


def test_frame_decoder_splits_and_limits():
    decoder = FrameDecoder(max_size=10)
    assert decoder.feed(b"\x00\x00\x00\x02ab\x00\x00") == [b"ab"]
    assert decoder.pending_partial()
    assert decoder.feed(b"\x00\x01c") == [b"c"]
    assert not decoder.pending_partial()
    with pytest.raises(ProtocolError, match="exceeds socket.request.max.bytes"):
        FrameDecoder(10).feed(b"\x00\x00\x00\x0b")
    with pytest.raises(ProtocolError, match="negative frame size"):
        FrameDecoder(10).feed(b"\xff\xff\xff\xff")


class _Part:
    def __init__(self, data: bytes):
        self.data = data
        self.size = len(data)


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_deferred_records_encode_like_inline_bytes(version):
    """A fetch response whose records stay on disk frames exactly like one holding the bytes."""
    records = build_batch([(b"k", b"v" * 50)] * 3)

    def body(value):
        return {"throttle_time": 0, "responses": [{"topic": "t", "partitions": [
            {"partition_index": 0, "error_code": 0, "high_watermark": 3, "records": value}]}]}

    parts = [_Part(records[:40]), _Part(records[40:])]
    chunks = protocol.encode_response_chunks(1, version, 9, body(protocol.Deferred(parts)))
    assert chunks[1:3] == parts  # the parts themselves are handed to the transport
    joined = b"".join(c if isinstance(c, bytes) else c.data for c in chunks)
    assert joined == protocol.encode_response(1, version, 9, body(records))


def test_a_response_with_kafkas_minus_one_timestamps_is_decoded_with_raw_timestamps():
    """Apache Kafka 3.9 refuses CreateDelegationToken on a PLAINTEXT listener with issue,
    expiry and max timestamps of -1, which kio will not turn into datetimes; the answer is still
    decoded, those fields as integer milliseconds, everything else as usual."""
    import struct

    def compact(text: str) -> bytes:
        return bytes([len(text) + 1]) + text.encode()

    frame = (struct.pack(">i", 7) + b"\x00"  # correlation id, response header tags
             + struct.pack(">h", 64) + compact("") * 4 + struct.pack(">qqq", -1, -1, -1)
             + compact("") + b"\x01" + struct.pack(">i", 0) + b"\x00")
    correlation, body = protocol.decode_response(38, 3, frame)
    assert correlation == 7
    assert protocol.error_name(int(body.error_code)) == "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"
    assert (body.issue_timestamp, body.expiry_timestamp, body.max_timestamp) == (-1, -1, -1)
    assert body.hmac == b""
    again = protocol.encode_response(38, 3, correlation, body)
    assert again[4:] == frame  # written back the way it was read


def test_a_minus_one_timestamp_inside_a_nested_entity_is_decoded_raw_too():
    """Apache Kafka answers DescribeTransactions for an Empty transaction (initialised, none
    begun) with a start time of -1 inside each ``transaction_states`` entry; the nested
    timestamp is read as integer milliseconds, the rest as usual."""
    import struct

    def compact(text: str) -> bytes:
        return bytes([len(text) + 1]) + text.encode()

    frame = (struct.pack(">i", 7) + b"\x00" + struct.pack(">i", 0)  # header tags, throttle
             + b"\x02" + struct.pack(">h", 0) + compact("txn") + compact("Empty")
             + struct.pack(">iqqh", 60_000, -1, 5, 0) + b"\x01" + b"\x00"  # no topics, tags
             + b"\x00")
    correlation, body = protocol.decode_response(65, 0, frame)
    (state,) = body.transaction_states
    assert (correlation, state.transaction_state, state.transaction_start_time) == (
        7, "Empty", -1)
    assert (state.producer_id, state.transaction_timeout.total_seconds()) == (5, 60)
    assert protocol.encode_response(65, 0, correlation, body)[4:] == frame
