"""What the HTML report plots, queried from a history already registered as the view "history".

Kept apart from harness.checker.spark, which registers the view: these are plain SQL queries
(harness.checker.sql) run on whatever session is handed in, each bounded before collecting.
"""

from __future__ import annotations

from typing import Any

from harness import history
from harness.checker import nemesis_ops, sql
from harness.checker import result as R
from harness.checker import timeline as timeline_py


def report_data(
    spark: Any,
    result: R.CheckResult,
    *,
    buckets: int = timeline_py.BUCKETS,
    around: int = 20,
    points_per_anchor: int = 400,
) -> R.ReportData:
    """Bucketed throughput and latency, the nemesis' fault windows, and the observed offsets of
    each example's partition within `around` of its offset."""
    first, last = result.stats["first_time_ns"], result.stats["last_time_ns"]
    width = timeline_py.bucket_width(first, last, buckets)
    anchors = [
        (name, index, anchor)
        for name in R.ANOMALIES
        for index, example in enumerate(result.anomalies[name].examples[:3])
        if (anchor := R.example_anchor(example)) is not None
    ]
    timeline = [
        R.TimelineBucket(first + r[0] * width, *r[1:])
        for r in spark.sql(sql.timeline(first, width)).collect()
    ]
    nemesis = nemesis_ops.operations(
        nemesis_ops.NemesisRow(*r) for r in spark.sql(sql.nemesis(10_000)).collect()
    )
    points: list[list[R.OffsetPoint]] = [[] for _ in anchors]
    if anchors:
        query = sql.neighborhoods([a for _, _, a in anchors], around, points_per_anchor)
        for r in spark.sql(query).orderBy("time_ns", "offset").collect():
            kind = "read" if r["read"] else "send"
            points[r["anchor"]].append(R.OffsetPoint(r["time_ns"], r["offset"], kind, r["process"]))
    txn_timeline, txn_rows = [], {}
    if result.stats.get("txns") or R.report_txns(result):
        # A history with transactions only: any other's report stays as it was.
        txn_timeline = [R.TxnBucket(first + r[0] * width, *r[1:])
                        for r in spark.sql(sql.txn_timeline(first, width)).collect()]
        txn_rows = _txn_rows(spark, R.report_txns(result))
    return R.ReportData(
        bucket_ns=width,
        timeline=timeline,
        faults=nemesis_ops.windows(nemesis, last),
        neighborhoods=[
            R.Neighborhood(name, index, t, p, o, points[i])
            for i, (name, index, (t, p, o)) in enumerate(anchors)
        ],
        nemesis=nemesis,
        txn_timeline=txn_timeline,
        txn_rows=txn_rows,
    )


def _txn_rows(spark: Any, txns: list[int]) -> dict[int, list[dict[str, Any]]]:
    """The rows of each transaction the examples name, as timeline.txn_rows gives them."""
    if not txns:
        return {}
    found: dict[int, list[dict[str, Any]]] = {}
    for r in spark.sql(sql.txn_rows(txns, R.ROWS_PER_TXN + 1)).collect():
        found.setdefault(r["of_txn"], []).append({n: r[n] for n in history.COLUMN_NAMES})
    return {
        txn: sorted(rows, key=lambda r: (r["time_ns"], r["process"], r["seq"]))
        for txn, rows in sorted(found.items())
    }
