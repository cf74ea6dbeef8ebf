"""The checker's second engine: the pure-Python rules (:mod:`harness.checker.rules`) over a
history read into memory, with the same report data the Spark engine gives.

For small histories and machines without a JVM: no Spark session to start (15 s here), but
memory grows with the history. The verdicts are the Spark engine's — a property test holds the
two equal — so ``check --engine python`` and ``run --engine python`` judge exactly as Spark
does.
"""

from __future__ import annotations

from pathlib import Path

from harness import history
from harness.checker import nemesis_ops, rules, timeline
from harness.checker.nemesis_ops import NemesisRow
from harness.checker.result import MAX_EXAMPLES, CheckResult, ReportData, report_txns


def check(history_dir: Path, guarantee: str, *,
          max_examples: int = MAX_EXAMPLES) -> tuple[CheckResult, ReportData]:
    """The verdict on a history and what its report shows; HistoryError on a bad history."""
    events = history.read_history(history_dir)
    result = rules.check_events(events, guarantee, max_examples=max_examples)
    nemesis = nemesis_ops.operations(NemesisRow(e.time_ns, e.op, e.type, e.value, e.error)
                                     for e in events if e.f == "nemesis")
    first, last = result.stats.get("first_time_ns"), result.stats.get("last_time_ns") or 0
    width = timeline.bucket_width(first or 0, last)
    buckets = timeline.timeline(events, first, width) if first is not None else []
    data = ReportData(width, buckets, nemesis_ops.windows(nemesis, last), [], nemesis)
    if result.stats.get("txns") or report_txns(result):
        # A history with transactions only: any other's report stays as it was.
        data.txn_timeline = timeline.txn_timeline(events, first or 0, width)
        data.txn_rows = timeline.txn_rows(events, report_txns(result))
    return result, data
