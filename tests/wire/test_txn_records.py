"""`__transaction_state` keys and values: Kafka's byte layout, round trips, bad input."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.wire.group_records import RecordFormatError
from harness.wire.txn_records import (
    TxnLogValue,
    decode_txn_key,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
    group_partitions,
)


def test_the_key_is_version_0_and_the_id_as_a_kafka_string():
    assert encode_txn_key("tx") == b"\x00\x00\x00\x02tx"
    assert decode_txn_key(b"\x00\x00\x00\x02tx") == "tx"


def test_a_value_in_kafkas_v0_layout_byte_for_byte():
    value = TxnLogValue(5, 2, 60000, 1, (("a", (0, 3)),), 1234, 1000)
    expected = (struct.pack(">hqhib", 0, 5, 2, 60000, 1) + struct.pack(">i", 1)
                + b"\x00\x01a" + struct.pack(">iii", 2, 0, 3) + struct.pack(">qq", 1234, 1000))
    assert encode_txn_value(value) == expected
    assert decode_txn_value(expected) == value


def test_an_empty_transaction_writes_null_partitions():
    value = TxnLogValue(5, 0, 100, 0, None, 1, -1)
    assert encode_txn_value(value)[17:21] == b"\xff\xff\xff\xff"
    assert decode_txn_value(encode_txn_value(value)) == value


def test_partitions_are_grouped_by_topic_in_order():
    assert group_partitions([("b", 1), ("a", 2), ("b", 0)]) == (("a", (2,)), ("b", (0, 1)))


@pytest.mark.parametrize("data", [b"\x00\x01\x00\x01a", b"\x00\x00\x00\x05ab"])
def test_an_unknown_version_or_a_truncated_key_is_refused(data):
    with pytest.raises(RecordFormatError):
        decode_txn_key(data)


def test_a_flexible_or_truncated_value_is_refused():
    good = encode_txn_value(TxnLogValue(5, 0, 100, 0, None, 1, -1))
    with pytest.raises(RecordFormatError):
        decode_txn_value(b"\x00\x01" + good[2:])
    with pytest.raises(RecordFormatError):
        decode_txn_value(good[:-1])


_VALUES = st.builds(
    TxnLogValue, st.integers(-1, 2**63 - 1), st.integers(-1, 32767), st.integers(0, 2**31 - 1),
    st.integers(0, 7),
    st.one_of(st.none(), st.lists(st.tuples(st.text(min_size=1, max_size=20),
                                            st.lists(st.integers(0, 2**31 - 1), max_size=5)
                                            .map(tuple)), max_size=4).map(tuple)),
    st.integers(-1, 2**62), st.integers(-1, 2**62))


@given(_VALUES, st.text(max_size=50))
def test_round_trip(value, transactional_id):
    assert decode_txn_value(encode_txn_value(value)) == value
    assert decode_txn_key(encode_txn_key(transactional_id)) == transactional_id
