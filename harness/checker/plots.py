"""What the HTML report plots, queried from a history already registered as the view "history".

Kept apart from harness.checker.spark, which registers the view: these are plain SQL queries
(harness.checker.sql) run on whatever session is handed in, each bounded before collecting.
"""

from __future__ import annotations

from typing import Any

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
    return R.ReportData(
        bucket_ns=width,
        timeline=timeline,
        faults=nemesis_ops.windows(nemesis, last),
        neighborhoods=[
            R.Neighborhood(name, index, t, p, o, points[i])
            for i, (name, index, (t, p, o)) in enumerate(anchors)
        ],
        nemesis=nemesis,
    )
