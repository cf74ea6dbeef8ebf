"""The aborted-transaction index (.txnindex): codec, search, file behaviour."""

from reference_broker.log.transaction_index import (
    ENTRY_SIZE,
    AbortedTxn,
    TransactionIndex,
    collect_aborted,
    decode_entries,
    encode_entries,
)


def test_an_entry_is_kafkas_34_byte_aborted_txn():
    entry = AbortedTxn(producer_id=7, first_offset=10, last_offset=20, last_stable_offset=21)
    data = encode_entries([entry])
    assert ENTRY_SIZE == len(data) == 34
    assert data[:2] == b"\x00\x00"  # version 0
    assert int.from_bytes(data[2:10], "big") == 7
    assert decode_entries(data) == ([entry], 34)


def test_a_torn_or_unknown_tail_is_left_out():
    a, b = AbortedTxn(1, 0, 1, 2), AbortedTxn(2, 3, 4, 5)
    data = encode_entries([a, b])
    assert decode_entries(data[:-3]) == ([a], 34)
    assert decode_entries(data[:34] + b"\x00\x01" + data[36:]) == ([a], 34)


def test_search_overlaps_the_range_and_stops_once_the_stable_offset_passed_it():
    seg1 = [AbortedTxn(1, 0, 4, 2), AbortedTxn(2, 2, 6, 7)]
    seg2 = [AbortedTxn(3, 8, 9, 10), AbortedTxn(4, 11, 12, 13)]
    seg3 = [AbortedTxn(5, 5, 20, 21)]  # never reached: seg2 shows the range was stable
    assert collect_aborted([seg1, seg2, seg3], 5, 10) == [seg1[1], seg2[0]]
    # a transaction whose marker is far away is still found
    assert collect_aborted([[], [AbortedTxn(6, 1, 30, 31)]], 0, 3) == [AbortedTxn(6, 1, 30, 31)]


def test_the_file_is_made_on_the_first_abort_and_truncated_with_the_log(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(path)
    assert not path.exists()
    entries = [AbortedTxn(1, 0, 3, 4), AbortedTxn(2, 5, 8, 9), AbortedTxn(3, 9, 12, 13)]
    for entry in entries:
        index.append(entry)
    index.flush()
    assert path.stat().st_size == 3 * ENTRY_SIZE
    assert TransactionIndex(path).entries == tuple(entries)
    index.truncate_to(8)  # the marker at 8 is cut off with the log
    assert TransactionIndex(path).entries == tuple(entries[:1])
    index.truncate_to(0)
    assert not path.exists()


def test_a_torn_file_is_cut_back_on_open(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(encode_entries([AbortedTxn(1, 0, 3, 4)]) + b"\x00\x00\x01")
    assert TransactionIndex(path).entries == (AbortedTxn(1, 0, 3, 4),)
    assert path.stat().st_size == ENTRY_SIZE
