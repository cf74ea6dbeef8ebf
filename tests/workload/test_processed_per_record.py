"""The transactions suite's count of exactly-once processing per input record
(suites/transactions/_processed.py): a value written twice and processed twice is right, one
written once and processed twice is not."""

from __future__ import annotations

from harness.history import Event
from suites.transactions._processed import overprocessed


def _row(seq: int, f: str, value: str, topic: str | None = None, offset: int | None = None, *,
         derived_from: str | None = None, isolation: str | None = None) -> Event:
    return Event(run_id="r", process=1, seq=seq, op=seq, time_ns=seq, type="ok", f=f,
                 topic=topic, partition=0, offset=offset, value=value,
                 derived_from=derived_from, isolation=isolation)


def test_outputs_beyond_an_inputs_records_are_counted_and_duplicated_inputs_are_not():
    events = [
        # "twice" is two input records, each processed once: right.
        _row(1, "poll", "twice", "in", 0), _row(2, "poll", "twice", "in", 5),
        _row(3, "send", "o1", derived_from="twice"), _row(4, "send", "o2", derived_from="twice"),
        _row(5, "poll", "o1", "out", 0, isolation="read_committed"),
        _row(6, "poll", "o2", "out", 1, isolation="read_committed"),
        # "once" is one record processed into two committed outputs: wrong.
        _row(7, "poll", "once", "in", 1),
        _row(8, "send", "o3", derived_from="once"), _row(9, "send", "o4", derived_from="once"),
        _row(10, "poll", "o3", "out", 2, isolation="read_committed"),
        _row(11, "poll", "o4", "out", 3, isolation="read_committed"),
        _row(12, "poll", "o4", "out", 3, isolation="read_committed"),  # read again: one output
        # An output only read uncommitted (an aborted transaction's) does not count.
        _row(13, "poll", "single", "in", 2), _row(14, "send", "o5", derived_from="single"),
        _row(15, "send", "o6", derived_from="single"),
        _row(16, "poll", "o5", "out", 4, isolation="read_committed"),
        _row(17, "poll", "o6", "out", 5, isolation="read_uncommitted"),
    ]
    assert overprocessed(events, "in", "out") == {"once": (2, 1)}
