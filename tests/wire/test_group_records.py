"""__consumer_offsets layouts, checked byte for byte against Kafka's published formats."""

import struct

import pytest

from harness.wire.group_records import (
    GroupMetadataKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    RecordFormatError,
    decode_assignment,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_assignment,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    encode_subscription,
    subscribed_topics,
)


def test_offset_key_layout():
    data = encode_offset_key("g", "topic", 7)
    assert data == struct.pack(">hh1sh5si", 1, 1, b"g", 5, b"topic", 7)
    assert decode_key(data) == OffsetKey("g", "topic", 7)
    assert decode_key(struct.pack(">hh1sh1si", 0, 1, b"g", 1, b"t", 0)) == OffsetKey("g", "t", 0)


def test_group_key_layout():
    assert encode_group_key("grp") == struct.pack(">hh3s", 2, 3, b"grp")
    assert decode_key(encode_group_key("grp")) == GroupMetadataKey("grp")


def test_offset_value_v3_and_v1():
    value = OffsetValue(42, 5, "meta", 1000)
    assert encode_offset_value(value) == struct.pack(">hqih4sq", 3, 42, 5, 4, b"meta", 1000)
    assert decode_offset_value(encode_offset_value(value)) == value
    expiring = OffsetValue(42, -1, "", 1000, expire_timestamp=2000)
    assert encode_offset_value(expiring) == struct.pack(">hqhqq", 1, 42, 0, 1000, 2000)
    assert decode_offset_value(encode_offset_value(expiring)) == expiring
    v0 = struct.pack(">hqh1sq", 0, 9, 1, b"m", 77)
    assert decode_offset_value(v0) == OffsetValue(9, -1, "m", 77)


def test_group_value_round_trip_and_old_versions():
    member = MemberValue("m-1", "i-1", "client", "/127.0.0.1", 300, 100, b"sub", b"asg")
    value = GroupValue("consumer", 4, "range", "m-1", 123, (member,))
    assert decode_group_value(encode_group_value(value)) == value
    empty = GroupValue("consumer", 5, None, None, 9)
    assert decode_group_value(encode_group_value(empty)) == empty
    v0 = (struct.pack(">hh8si", 0, 8, b"consumer", 1) + struct.pack(">hh", -1, -1)
          + struct.pack(">i", 1) + struct.pack(">h1sh1sh1si", 1, b"m", 1, b"c", 1, b"h", 50)
          + struct.pack(">i1si1s", 1, b"s", 1, b"a"))
    decoded = decode_group_value(v0)
    assert decoded.members[0] == MemberValue("m", None, "c", "h", 50, 50, b"s", b"a")


@pytest.mark.parametrize("data", [b"", b"\x00\x09", struct.pack(">hh", 1, 50)])
def test_malformed_records_are_rejected(data):
    with pytest.raises(RecordFormatError):
        decode_key(data)


def test_consumer_protocol_blobs():
    for version in range(4):
        assert subscribed_topics(encode_subscription(["a", "b"], version)) == {"a", "b"}
        blob = encode_assignment({"a": [0, 2]}, version)
        assert decode_assignment(blob) == {"a": [0, 2]}
    assert decode_assignment(b"") == {}
    with pytest.raises(RecordFormatError):
        subscribed_topics(b"\x00")
