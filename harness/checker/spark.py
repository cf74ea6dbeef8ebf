"""The anomaly rules as Spark jobs: the checker that scales past one machine.

The Spark engine's entry point: check, report_data and the benchmark's grouping_rows. It mirrors
harness.checker.rules (the reference the property test holds it to) rule for rule, but never
brings a dataset to the driver: one job computes every validation verdict, anomaly count, the
first examples and the stats as a handful of aggregated rows; a second fetches the rows that
give the examples their context; a third, only for the HTML report, the bucketed timeline and
the offsets around each example. This module runs those jobs, decides what is cached and how
the history is shuffled, and turns their rows into a CheckResult; reading the history
(spark_load) and the rules themselves (spark_rules) are modules of their own. These three and
harness.checker.spark_session (the session they run on) are the Spark engine: the only modules
that import pyspark.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import replace
from functools import reduce
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from harness import history
from harness.checker import plots, spark_jvm, sql
from harness.checker import result as R
from harness.checker import spark_rules_txn as txn_rules
from harness.checker.rules_txn import Cycle
from harness.checker.spark_load import NAMES, SCHEMA, load, open_history, raise_first, release
from harness.checker.spark_rules import (
    BY_PROCESS,
    BY_TP,
    BY_VALUE,
    ON_DRIVER,
    all_instances,
    by_process_rules,
    by_topic_partition,
    groupings,
    intern_topics,
    rule_frames,
)

# The engine's public names. SCHEMA (spark_load) and groupings (spark_rules) are re-exported:
# the benchmark and the tests find the whole engine here.
__all__ = ["SCHEMA", "check", "grouping_rows", "groupings", "report_data"]




# ---------------------------------------------------------------------------------------------
# The check


def check(
    spark: SparkSession,
    directory: str | os.PathLike[str],
    guarantee: str = R.DEFAULT_GUARANTEE,
    *,
    max_examples: int = R.MAX_EXAMPLES,
    passes: bool | None = None,
) -> R.CheckResult:
    """Validate and judge the history in `directory`; raises history.HistoryError if malformed.

    passes: whether the by-topic-partition and by-process rules run as the compiled passes
    (spark_jvm) or as SQL; by default the passes wherever the session can run them
    (spark_jvm.available)."""
    if guarantee not in R.GUARANTEES:
        raise ValueError(f"unknown guarantee {guarantee!r}")
    if passes is None:
        passes = spark_jvm.available(spark)
    with open_history(spark, directory) as (files, h, small):
        return _judge(spark, files, h, small, guarantee, max_examples, passes)


def grouping_rows(
    spark: SparkSession, directory: str | os.PathLike[str]
) -> dict[tuple[str, ...], DataFrame]:
    """What each of the rules' groupings ships for the history in `directory`, its topics
    interned as the check interns them: the benchmark's bound moves exactly these."""
    interned, _, on, _ = intern_topics(load(spark, history.history_files(directory)))
    annotated = txn_rules.annotate(interned, on)
    return groupings(annotated.rows, txn_rules.run_ends(annotated))


def _judge(
    spark: SparkSession,
    files: list[Path],
    h: DataFrame,
    small: bool,
    guarantee: str,
    max_examples: int,
    passes: bool,
) -> R.CheckResult:
    # Whatever several rules read is cached on local disk: Spark would otherwise recompute it,
    # shuffles included, once per reader. On disk, not in memory: one process's or partition's
    # rows land in one task, and unrolling such a block in a bounded heap is what runs out of
    # memory. A small history is one cached partition already; recomputing from it is cheaper.
    cached: list[DataFrame] = []

    def keep(frame: DataFrame) -> DataFrame:
        if small:
            return frame
        cached.append(frame.persist(StorageLevel.DISK_ONLY))
        return cached[-1]

    def shuffled(frame: DataFrame, *keys: str, order: list[str]) -> DataFrame:
        # Sorted once before caching, so the windows over it need no sort of their own.
        frame = frame if small else frame.repartition(*keys)
        return keep(frame.sortWithinPartitions(*keys, *order))

    def hold(frame: DataFrame) -> DataFrame:
        # What several readers share and many operators made (the transactional annotation,
        # every rule's instances): kept whatever the history's size. A small history's is
        # checkpointed in memory, its lineage cut: every later DataFrame call analyses the
        # whole plan under it, and on the transactional annotation's plan that took 0.5 to
        # 17 s a call, most of a tiny history's check; and the result's job, which reads the
        # instances twice (counted, ranked), would plan and run every rule twice
        # (docs/benchmarks.md).
        if small:
            return frame.localCheckpoint(eager=True)
        cached.append(frame.persist(StorageLevel.DISK_ONLY))
        return cached[-1]

    interned, topics, on, stats = intern_topics(h)
    try:
        annotated = txn_rules.annotate(interned, on)
        if on:
            annotated = replace(annotated, rows=hold(annotated.rows), txns=hold(annotated.txns))
        rows = groupings(annotated.rows, txn_rules.run_ends(annotated))
        if passes:
            # The passes read each grouping once, streamed: nothing to cache. Each t/p and
            # each process must be in one partition, a small history's too.
            rules = {
                **spark_jvm.by_topic_partition(
                    rows[BY_TP].repartition(*BY_TP).sortWithinPartitions(*BY_TP, "offset"),
                    hold,
                ),
                **spark_jvm.by_process(
                    rows[BY_PROCESS].repartition(*BY_PROCESS)
                    .sortWithinPartitions(*BY_PROCESS, "op", "seq"),
                    hold,
                ),
            }
        else:
            rules = {
                **by_topic_partition(
                    shuffled(rows[BY_TP], *BY_TP, order=["offset"]), keep, annotated.on
                ),
                # Only hash aggregations read it, and each needs the rows of a process
                # together: one exchange and no sort (seq reuse is a count per (process,
                # seq), not a window).
                **by_process_rules(
                    rows[BY_PROCESS] if small else rows[BY_PROCESS].repartition(*BY_PROCESS),
                    keep,
                ),
            }
        frames = rule_frames(stats, rules, rows[BY_VALUE], keep, annotated)
        return _collect(
            spark, files, h, topics, frames, hold(all_instances(frames)), guarantee, max_examples,
            lambda: txn_rules.g1c(annotated, topics),
        )
    finally:
        for frame in cached:
            release(frame)


# ---------------------------------------------------------------------------------------------
# Collecting: the jobs' rows on the driver, as a CheckResult


def _context(h: DataFrame, selections: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The rows each example names, at most ROWS_PER_EXAMPLE each, in (process, seq) order."""
    found: list[list[dict[str, Any]]] = [[] for _ in selections]
    if not selections:
        return found
    candidates, tags = sql.context(selections)
    matched = h.where(F.expr(candidates)).select(*NAMES, F.explode(F.expr(tags)).alias("example"))
    rank = F.row_number().over(Window.partitionBy("example").orderBy("process", "seq"))
    for row in matched.withColumn("k", rank).where(F.col("k") <= R.ROWS_PER_EXAMPLE).collect():
        found[row["example"]].append({n: row[n] for n in NAMES})
    for rows in found:
        rows.sort(key=lambda r: (r["process"], r["seq"]))
    return found


def _as_result(kind: str, frame: DataFrame, name: Column, *payload: str) -> DataFrame:
    """Rows of one kind in the one shape the check's single job returns to the driver."""
    return frame.select(
        F.lit(kind).alias("kind"),
        name.cast("string").alias("name"),
        F.to_json(F.struct(*payload), {"ignoreNullFields": "false"}).alias("payload"),
    )


def _collect(
    spark: SparkSession,
    files: list[Path],
    h: DataFrame,
    topics: list[str],
    frames: dict[str, DataFrame],
    instances: DataFrame,
    guarantee: str,
    max_examples: int,
    g1c: Callable[[], list[Cycle]],
) -> R.CheckResult:
    """One job for every count, the first examples, the stats and the first problem; then, the
    history being well-formed, g1c's (its edges to the driver, as few as the transactions that
    read each other) and one for the examples' rows."""
    ranked = instances.withColumn(
        "rank", F.row_number().over(Window.partitionBy("name").orderBy("key"))
    ).where(F.col("rank") <= max_examples)
    errors = ["0-row", "1-op", "2-seq", "3-value"]
    parts = [
        _as_result("count", instances.groupBy("name").count(), F.col("name"), "count"),
        _as_result("example", ranked, F.col("name"), "rank", "fields", "select"),
        *[
            _as_result("stats", frames[n], F.lit(None), "*")
            for n in ("stats", "processes", "topic_partitions", "txn_stats")
        ],
        *[
            _as_result("error", frames[n].agg(F.min(F.struct("*")).alias("e")), F.lit(n), "e")
            for n in errors
        ],
    ]
    found: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for row in reduce(DataFrame.union, parts).collect():
        found.setdefault(row["kind"], []).append((row["name"], json.loads(row["payload"])))
    raise_first(spark, files, h, {kind: p["e"] for kind, p in found["error"] if p["e"]})

    def named_topic(value: dict[str, Any]) -> dict[str, Any]:
        return {
            **value,
            "topic": topics[value["topic"]] if value["topic"] is not None else None,
        }

    def named(value: dict[str, Any] | None) -> dict[str, Any] | None:
        return value and named_topic(value)

    examples = sorted(found.get("example", []), key=lambda item: (item[0], item[1]["rank"]))
    cycles = g1c()
    examples += [(name, payload) for name, payload in _cycle_examples(cycles[:max_examples])]
    selections = [
        {
            **p["select"],
            "sel_tpo": named(p["select"]["sel_tpo"]),
            "sel_gtpo": named(p["select"]["sel_gtpo"]),
        }
        for _, p in examples
    ]
    context = _context(h, selections)
    anomalies = {name: R.AnomalyResult() for name in R.ANOMALIES}
    for name, payload in found.get("count", []):
        anomalies[name].count = payload["count"]
    anomalies["g1c"].count = len(cycles)
    for (name, payload), rows in zip(examples, context, strict=True):
        fields = {k: payload["fields"][k] for k in R.EXAMPLE_FIELDS[name]}
        if "topic" in fields and name not in ON_DRIVER:
            fields = named_topic(fields)
        anomalies[name].examples.append({**fields, "rows": rows})
    stats = {k: v for _, payload in found["stats"] for k, v in payload.items()}
    return R.CheckResult(guarantee=guarantee, anomalies=anomalies, stats=stats)


def _cycle_examples(cycles: list[Cycle]) -> list[tuple[str, dict[str, Any]]]:
    """g1c's examples in the shape of the job's (fields, and selectors naming the read behind
    each edge), so they take their rows from the same context job; they come lowest first."""
    none = dict.fromkeys(sql.SELECTORS)
    return [
        (
            "g1c",
            {
                "fields": {"txn": c.txns[0], "txns": c.txns[:R.ROWS_PER_EXAMPLE], "cycle": c.cycle},
                "select": {**none, "sel_rows": [{"process": w.process, "seq": w.seq}
                                                 for w in c.witnesses]},
            },
        )
        for c in cycles
    ]


# ---------------------------------------------------------------------------------------------
# What the HTML report plots


def report_data(
    spark: SparkSession, directory: str | os.PathLike[str], result: R.CheckResult, **bounds: int
) -> R.ReportData:
    """What the HTML report plots (harness.checker.plots), from the history as a view."""
    if result.stats["first_time_ns"] is None:
        return R.ReportData(1, [], [], [])
    with open_history(spark, directory) as (_, h, _):
        h.createOrReplaceTempView("history")
        try:
            return plots.report_data(spark, result, **bounds)
        finally:
            spark.catalog.dropTempView("history")
