"""Rows survive a client that is killed mid-write, and only complete rows are kept."""

import time

from harness.history import read_history
from harness.workload.recorder import OP_BITS, Recorder, journal_path, parquet_path, salvage


def test_a_closed_recorder_leaves_one_valid_parquet_file(tmp_path):
    start = time.monotonic_ns()
    with Recorder(tmp_path, "r", 3, start) as recorder:
        op = recorder.next_op()
        recorder.record("invoke", "send", op, topic="t", value="3-0")
        recorder.record("ok", "send", op, topic="t", value="3-0", partition=0, offset=0)
    assert op >> OP_BITS == 3
    assert not journal_path(tmp_path, 3).exists()
    events = read_history(tmp_path)
    assert [(e.seq, e.type, e.process) for e in events] == [(1, "invoke", 3), (2, "ok", 3)]
    assert all(0 <= e.time_ns < time.monotonic_ns() - start for e in events)


def test_salvage_keeps_complete_rows_of_a_dead_process_and_drops_a_torn_one(tmp_path):
    recorder = Recorder(tmp_path, "r", 5, time.monotonic_ns())
    op = recorder.next_op()
    recorder.record("invoke", "send", op, topic="t", value="5-0")
    recorder._journal.write('{"run_id": "r", "proc')  # the kill came mid-line
    recorder._journal.close()  # the process dies: the recorder never converts its journal
    assert salvage(tmp_path) == [parquet_path(tmp_path, 5)]
    events = read_history(tmp_path)
    assert [(e.type, e.value) for e in events] == [("invoke", "5-0")]
    assert not journal_path(tmp_path, 5).exists()
