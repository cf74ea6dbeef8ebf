"""The aborted-transaction index (.txnindex): codec, search, file behaviour."""

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.wire.control_records import ControlType, EndTxnMarker
from harness.wire.records import build_batch, patch_base_offset, read_header
from reference_broker.log.producer_state import ProducerStateManager
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


# --- a property: the early stop never misses an abort ---------------------------------------

_history = st.lists(st.tuples(st.sampled_from(["data", "commit", "abort"]), st.integers(0, 3)),
                    min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(_history, st.sets(st.integers(1, 40)), st.data())
def test_the_search_finds_every_overlapping_abort(history, cuts, data):
    """Entries made by the real producer state (so their stable offsets are what a log
    records), spread over segments cut anywhere: the search from the segment holding the
    start offset, with its early stop, finds exactly what a scan of every entry finds."""
    state = ProducerStateManager()
    entries = []
    for offset, (op, pid) in enumerate(history):
        if op == "data":
            state.update(_txn_batch(pid, offset), offset, offset)
        else:
            marker = EndTxnMarker(ControlType.ABORT if op == "abort" else ControlType.COMMIT, 0)
            done = state.complete(pid, 0, marker, offset)
            if done.is_aborted:
                entries.append(AbortedTxn(pid, done.first_offset, done.last_offset,
                                          done.last_stable_offset))
    end = len(history)
    bases = sorted({0} | {c for c in cuts if c < end})
    segments = [[e for e in entries if base <= e.last_offset < (bases[i + 1] if i + 1 < len(bases)
                                                                 else end)]
                for i, base in enumerate(bases)]
    start = data.draw(st.integers(0, end - 1))
    upper = data.draw(st.integers(start + 1, end + 1))
    first = max(i for i, base in enumerate(bases) if base <= start)
    assert collect_aborted(segments[first:], start, upper) == \
        [e for e in entries if e.last_offset >= start and e.first_offset < upper]


def _txn_batch(pid, offset):
    data = bytearray(build_batch([(None, b"v")], producer_id=pid, producer_epoch=0,
                                 base_sequence=offset, transactional=True))
    patch_base_offset(data, 0, offset)
    return read_header(data)
