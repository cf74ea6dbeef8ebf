"""Exactly-once processing counted per input *record*, for a consume-transform-produce history
whose input has values written twice.

The checker's ``double_processed`` counts per input *value* (HISTORY.md): two committed outputs
derived from one value. That is exactly-once only while every input value is one record. The
workload's input producers are plain idempotent producers, and under faults they write some
values twice (``duplicate``; see test_txn_chaos.py): two records, each rightly processed into
an output of its own, which ``double_processed`` then counts. What processing exactly once
forbids is more committed outputs of a value than records of it — which this counts.

Committed outputs are read off the history as a read_committed consumer saw them: the output
records (distinct topic/partition/offset) any read_committed poll read, each mapped to its input
by its send's ``derived_from``. An input's records are the distinct offsets at which any poll
read its value in the input topic. Pure: it takes the history's events and returns counts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from harness.history import Event

Position = tuple[str, int, int]


def overprocessed(events: Iterable[Event], input_topic: str, output_topic: str
                  ) -> dict[str, tuple[int, int]]:
    """Input value -> (committed outputs, input records) for each value with more committed
    outputs than records: what exactly-once processing forbids, duplicated inputs allowed for."""
    events = list(events)
    source = {e.value: e.derived_from for e in events
              if e.f == "send" and e.derived_from is not None and e.value is not None}
    records: dict[str, set[Position]] = defaultdict(set)
    outputs: dict[str, set[Position]] = defaultdict(set)
    for e in events:
        if e.f != "poll" or e.type != "ok" or e.offset is None or e.value is None:
            continue
        position = (e.topic or "", e.partition, e.offset)
        if e.topic == input_topic:
            records[e.value].add(position)
        elif (e.topic == output_topic and e.isolation == "read_committed"
              and e.value in source):
            outputs[source[e.value]].add(position)
    return {value: (len(out), len(records[value])) for value, out in sorted(outputs.items())
            if len(out) > max(1, len(records[value]))}
