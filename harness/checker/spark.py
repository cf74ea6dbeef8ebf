"""The anomaly rules as Spark jobs: the checker that scales past one machine.

This module and harness.checker.spark_session (the session it runs on) are the only ones that
import pyspark. It mirrors harness.checker.rules (the reference the property test holds it to) rule
for rule, but never brings a dataset to the driver: one job computes every validation verdict,
anomaly count, the first examples and the stats as a handful of aggregated rows; a second
fetches the rows that give the examples their context; a third, only for the HTML report, the
bucketed timeline and the offsets around each example.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from functools import reduce
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JError
from pyspark import StorageLevel
from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from harness import history
from harness.checker import cluster, plots, sql
from harness.checker import result as R
from harness.checker.spark_session import SparkError, is_connect

_SPARK_TYPES = {"string": T.StringType(), "int64": T.LongType(), "int32": T.IntegerType()}
SCHEMA = T.StructType([T.StructField(c.name, _SPARK_TYPES[c.kind]) for c in history.COLUMNS])
_DECODED = T.StructType([*SCHEMA.fields, T.StructField("_problem", T.StringType())])
_NAMES = list(history.COLUMN_NAMES)


def _release(frame: DataFrame) -> None:
    """Drop a cached frame; after a failure that stopped Spark there is nothing to drop, and
    saying so would hide the failure."""
    with suppress(Py4JError, PySparkException):
        frame.unpersist()


# ---------------------------------------------------------------------------------------------
# Reading


def _jsonl_lines(spark: SparkSession, paths: list[str]) -> DataFrame:
    # Line numbers exist only as positions: a line is its split (file, block start) and its
    # monotonically increasing id, whose order within a split is the file's order.
    return spark.read.text(paths).select(
        "value",
        F.col("_metadata.file_name").alias("_file"),
        F.col("_metadata.file_block_start").alias("_block"),
        F.monotonically_increasing_id().alias("_row"),
    )


def _load(spark: SparkSession, files: list[Path]) -> DataFrame:
    parquet = [str(p) for p in files if p.suffix == ".parquet"]
    jsonl = [str(p) for p in files if p.suffix == ".jsonl"]
    parts = []
    if parquet:
        parts.append(
            spark.read.schema(SCHEMA)
            .parquet(*parquet)
            .select(
                *_NAMES,
                F.col("_metadata.file_name").alias("_file"),
                F.lit(0).cast("long").alias("_block"),
                F.col("_metadata.row_index").alias("_row"),
                F.lit(None).cast("string").alias("_problem"),
            )
        )
    if jsonl:
        decode = F.udf(history.decode_json_row, _DECODED, useArrow=False)
        decoded = _jsonl_lines(spark, jsonl).select(
            decode("value").alias("r"), "_file", "_block", "_row"
        )
        parts.append(
            decoded.where(F.col("r").isNotNull()).select(
                *[F.col(f"r.{n}").alias(n) for n in _NAMES],
                "_file",
                "_block",
                "_row",
                F.col("r._problem").alias("_problem"),
            )
        )
    frame = reduce(DataFrame.unionByName, parts)
    for name in history.UNKNOWN_AS_MINUS_ONE:
        frame = frame.withColumn(name, F.coalesce(F.col(name), F.lit(-1)))
    return frame.withColumn("_pos", F.struct("_file", "_block", "_row"))


# ---------------------------------------------------------------------------------------------
# Rules. The history is shuffled three ways, each once: by process (operations, send order),
# by topic-partition (offsets, read runs, groups) and by value (what became of each send);
# every rule is computed inside one of them, save seq reuse (a count per (process, seq)).
# Each rule yields one row per anomaly with its example fields and selectors (sel_*) naming
# the rows that give the example context.

TP = ["topic", "partition"]
TPO = [*TP, "offset"]
COMMIT = ["group", *TP, "time_ns", "process", "seq"]


def _is_read() -> Column:
    return F.expr(sql.IS_READ)


def _is_known() -> Column:
    return F.expr(sql.IS_KNOWN)


def _when_count(condition: Column) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0))


def _ops(by_process: DataFrame) -> DataFrame:
    """Per (process, op): what validation needs, and each known ok send with its invoke's seq.
    Every aggregate is numeric: strings and structs would force Spark to sort instead of hash."""
    ops = by_process.groupBy("process", "op").agg(*map(F.expr, sql.op_aggregates()))
    problem, at_completion = sql.op_problem()
    return ops.select(
        "process",
        "op",
        "seq",
        *TPO,
        (F.col("sent") & F.expr(f"{sql.f_name('bits', lowest=True)} = 'send'")).alias("sent"),
        F.expr(problem).alias("problem"),
        F.expr(at_completion).alias("at_completion"),
    )


def _nonmonotonic_sends(ops: DataFrame) -> DataFrame:
    sends = ops.where(F.col("sent") & F.col("seq").isNotNull()).select("process", *TPO, "op", "seq")
    return (
        sends.selectExpr(*sql.lags(sql.SEND_ORDER, "offset", "op"))
        .where(F.col("offset") < F.col("previous_offset"))
        .withColumn("sel_ops", F.array("previous_op", "op"))
    )


def _values(value_rows: DataFrame) -> DataFrame:
    """Per value of note (sql.VALUE_OF_NOTE): was it sent, did its send fail, was it read, at
    how many places was it observed (two or more iff some position component varies), where
    was it acked."""
    return (
        value_rows.groupBy("value")
        .agg(*map(F.expr, sql.value_aggregates()))
        .selectExpr("*", sql.PLACES)
        .where(sql.VALUE_OF_NOTE)
    )


def _by_value(values: DataFrame, condition: Column) -> DataFrame:
    return values.where(condition).select("value", F.col("value").alias("sel_value"))


def _unread(values: DataFrame, highest: DataFrame, lost: bool) -> DataFrame:
    sent = values.where(F.col("op").isNotNull() & ~F.col("read")).select("value", *TPO, "op")
    joined = sent.join(highest, TP, "left")
    past = F.coalesce(F.col("max_read_offset") > F.col("offset"), F.lit(False))
    return joined.where(past if lost else ~past).withColumn("sel_ops", F.array("op"))


def _read_pairs(observed: DataFrame, keep: Callable[[DataFrame], DataFrame]) -> DataFrame:
    """Consecutive reads of a t/p by a process inside one run (ended by assign or revoke). Each
    read carries the dense rank of its offset among the t/p's observed offsets, so the observed
    offsets strictly between a pair are a difference of ranks, not a join. The ranked reads are
    kept between the two windows: a t/p is one window partition of each, and the first one's
    buffer and the second one's sort in one task are more than a task's memory at 100M rows."""
    reads = keep(
        observed.selectExpr("*", sql.OFFSET_RANK)
        .where(~F.col("known"))
        .select("process", *TP, "seq", "offset", "read", "rank")
    )
    return (
        reads.selectExpr(*sql.lags(sql.READ_ORDER, "read", "offset", "seq", "rank"))
        .where(F.col("read") & F.col("previous_read"))
        .selectExpr(
            "*",
            sql.row_refs(("process", "previous_seq"), ("process", "seq")),
            "rank - previous_rank - 1 AS observed_between",
        )
    )


def _commit_regressions(by_process: DataFrame) -> DataFrame:
    commits = by_process.where(F.col("group").isNotNull()).select(*COMMIT, "offset")
    return (
        commits.selectExpr(*sql.lags(sql.COMMIT_ORDER, "process", "seq", "offset"))
        .where(F.col("offset") < F.col("previous_offset"))
        .selectExpr("*", sql.row_refs(("previous_process", "previous_seq"), ("process", "seq")))
    )


def _group_exclusivity(reads: DataFrame) -> DataFrame:
    """Processes of one group whose reads of a t/p in one generation interleave in time: each
    process's reads span [first, last]; sorted by first (the longer span first on a tie, as in
    rules.py), a process that starts before an earlier one's last read overlaps it. A clean
    hand-over (KIP-345) does not."""
    keys = ["group", "generation", *TP]
    firsts = F.array_sort(F.collect_list(F.struct("process", "seq")))
    by_first = Window.partitionBy(*keys).orderBy("first_ns", F.desc("last_ns"), "process")
    earlier = by_first.rowsBetween(Window.unboundedPreceding, -1)
    return (
        reads.where(F.col("group").isNotNull() & (F.col("generation") >= 0))
        .groupBy(*keys, "process")
        .agg(F.min("seq").alias("seq"), F.min("time_ns").alias("first_ns"),
             F.max("time_ns").alias("last_ns"))
        .withColumn("overlaps", F.col("first_ns") < F.max("last_ns").over(earlier))
        .groupBy(*keys)
        .agg(
            F.count(F.lit(1)).alias("process_count"),
            F.max(F.coalesce("overlaps", F.lit(False))).alias("overlap"),
            F.slice(firsts, 1, R.ROWS_PER_EXAMPLE).alias("sel_rows"),
        )
        .where(F.col("overlap"))
        .drop("overlap")
        .withColumn("processes", F.transform("sel_rows", lambda r: r["process"]))
    )


def _redeliveries(reads: DataFrame) -> DataFrame:
    keys = ["group", *TPO]
    return (
        reads.where(F.col("group").isNotNull())
        .groupBy(*keys)
        .agg(F.min("op").alias("low"), F.max("op").alias("high"), F.count(F.lit(1)).alias("reads"))
        .where(F.col("low") != F.col("high"))
        .withColumn("sel_gtpo", F.struct(*keys))
    )


def _instances(name: str, frame: DataFrame) -> DataFrame:
    """One anomaly's instances in the shape shared by all, so one job ranks and counts them.
    Written as SQL expressions: one call to the JVM instead of hundreds of column objects."""
    return frame.selectExpr(*sql.instance(name, set(frame.columns)))


def _stats(h: DataFrame) -> DataFrame:
    return h.agg(*map(F.expr, sql.stats())).selectExpr(*sql.STATS_DERIVED)


# ---------------------------------------------------------------------------------------------
# The check


@contextmanager
def _history(
    spark: SparkSession, directory: str | os.PathLike[str]
) -> Iterator[tuple[list[Path], DataFrame, bool]]:
    """The history's rows as a DataFrame, with Spark tuned to its size and its failures made
    SparkError, and whether it is small; a small history (or one whose JSONL executors must
    decode) is cached."""
    files = history.history_files(directory)
    for path in files:
        if path.suffix == ".parquet":
            history.check_parquet_schema(path)
    size = sum(p.stat().st_size for p in files)
    jsonl = any(p.suffix == ".jsonl" for p in files)
    try:
        connect = is_connect(spark)
        cores = 8 if connect else spark.sparkContext.defaultParallelism
        for key, value in cluster.job_settings(size, cores).items():
            spark.conf.set(key, value)
        local = not connect and (spark.sparkContext.master or "").startswith("local")
        if jsonl and not local:
            archive = str(cluster.package_archive())
            if connect:
                spark.addArtifacts(archive, pyfile=True)
            else:
                spark.sparkContext.addPyFile(archive)
        h = _load(spark, files)
        small = size < cluster.SMALL_HISTORY
        if small:
            # One partition needs no shuffle at all: every grouping and window already has
            # its rows together, so the whole check runs as a couple of stages.
            h = h.coalesce(1)
        if small or jsonl:
            h = h.persist()
        try:
            yield files, h, small
        finally:
            _release(h)
    except (Py4JError, PySparkException) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SparkError(f"Spark job failed: {reason}") from exc


def _single_row(aggregation: DataFrame) -> Row:
    """The one row of a global aggregation, which Spark returns even for no input rows."""
    row = aggregation.first()
    if row is None:
        raise SparkError("Spark returned no row for a global aggregation")
    return row


def _raise_first(spark: SparkSession, files: list[Path], h: DataFrame, errors: dict) -> None:
    """Raise the first problem found, in the pure reader's order, at its first row."""
    if not errors:
        return
    kind = min(errors)
    found = errors[kind]
    if kind == "0-row":  # found: how many bad rows; the first is looked up now
        problem_column = F.expr(sql.row_problem())
        bad = h.select("_pos", problem_column.alias("problem")).where(F.col("problem").isNotNull())
        first = _single_row(bad.agg(F.min(F.struct("_pos", "problem"))))[0]
        at, problem = first["_pos"].asDict(), first["problem"]
    else:
        if kind == "1-op":
            rows = (F.col("process") == found["process"]) & (F.col("op") == found["op"])
            if found["at_completion"]:
                rows = rows & (F.col("type") != "invoke")
        elif kind == "2-seq":
            rows = (F.col("process") == found["process"]) & (F.col("seq") == found["seq"])
        else:
            rows = (F.col("f") == "send") & (F.col("type") == "invoke")
            rows = rows & (F.col("value") == found["value"])
        got = _single_row(
            h.where(rows).agg(F.min("_pos").alias("at"), F.count(F.lit(1)).alias("n"))
        )
        at = got["at"].asDict()
        problem = found.get("problem") or history.SEQ_REUSED.format(
            process=found["process"], seq=found["seq"], rows=got["n"]
        )
    path = next(p for p in files if p.name == at["_file"])
    if path.suffix == ".parquet":
        line = at["_row"] + 1
    else:
        jsonl = [str(p) for p in files if p.suffix == ".jsonl"]
        lines = _jsonl_lines(spark, jsonl).where(F.col("_file") == path.name)
        got = _single_row(lines.agg(
            _when_count(F.col("_block") < at["_block"]).alias("before"),
            F.min(F.when(F.col("_block") == at["_block"], F.col("_row"))).alias("start"),
        ))
        line = got["before"] + at["_row"] - got["start"] + 1
    raise history.HistoryError(history.Location(str(path), line), problem)


def _context(h: DataFrame, selections: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The rows each example names, at most ROWS_PER_EXAMPLE each, in (process, seq) order."""
    found: list[list[dict[str, Any]]] = [[] for _ in selections]
    if not selections:
        return found
    candidates, tags = sql.context(selections)
    matched = h.where(F.expr(candidates)).select(*_NAMES, F.explode(F.expr(tags)).alias("example"))
    rank = F.row_number().over(Window.partitionBy("example").orderBy("process", "seq"))
    for row in matched.withColumn("k", rank).where(F.col("k") <= R.ROWS_PER_EXAMPLE).collect():
        found[row["example"]].append({n: row[n] for n in _NAMES})
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


def check(
    spark: SparkSession,
    directory: str | os.PathLike[str],
    guarantee: str = R.DEFAULT_GUARANTEE,
    *,
    max_examples: int = R.MAX_EXAMPLES,
) -> R.CheckResult:
    """Validate and judge the history in `directory`; raises history.HistoryError if malformed."""
    if guarantee not in R.GUARANTEES:
        raise ValueError(f"unknown guarantee {guarantee!r}")
    with _history(spark, directory) as (files, h, small):
        return _judge(spark, files, h, small, guarantee, max_examples)


def _intern_topics(h: DataFrame) -> tuple[DataFrame, list[str]]:
    """The history with each topic replaced by its rank among the topic names: numbers shuffle,
    hash and aggregate far cheaper than strings, and rank order is name order."""
    topics = [
        r[0] for r in h.where(F.col("topic").isNotNull()).select("topic").distinct().collect()
    ]
    topics.sort()
    ids = F.create_map(*[F.lit(x) for i, t in enumerate(topics) for x in (t, i)])
    interned = F.try_element_at(ids, F.col("topic")) if topics else F.lit(None)
    return h.withColumn("topic", interned.cast("long")), topics


BY_PROCESS, BY_TP, BY_VALUE = ("process",), ("topic", "partition"), ("value",)


def groupings(interned: DataFrame) -> dict[tuple[str, ...], DataFrame]:
    """The three ways the rules group the history, by their keys, with what each ships: every
    row by process (operations, send order, commits, seq reuse), the observed rows and consumer
    runs by topic-partition, and the sends and reads by value. Each needs an exchange of its
    own, so the benchmark ships these three and computes nothing as its bound: what the check
    moves before any rule runs (ci/bench_checker.py)."""
    send_or_read = (F.col("f") == "send") | _is_read()
    return {
        BY_PROCESS: interned.selectExpr(*sql.by_process()),
        BY_TP: interned.where(
            _is_read() | _is_known() | F.col("f").isin("assign", "revoke")
        ).select(
            "process",
            "seq",
            "op",
            *TPO,
            *map(F.expr, sql.VALUE_KEY),
            "group",
            "generation",
            "time_ns",
            _is_read().alias("read"),
            _is_known().alias("known"),
        ),
        BY_VALUE: interned.where(send_or_read & F.col("value").isNotNull()).select(
            "value", "f", "type", *TPO, "op"
        ),
    }


def grouping_rows(
    spark: SparkSession, directory: str | os.PathLike[str]
) -> dict[tuple[str, ...], DataFrame]:
    """What each of the rules' groupings ships for the history in `directory`, its topics
    interned as the check interns them: the benchmark's bound moves exactly these."""
    interned, _ = _intern_topics(_load(spark, history.history_files(directory)))
    return groupings(interned)


def _judge(
    spark: SparkSession,
    files: list[Path],
    h: DataFrame,
    small: bool,
    guarantee: str,
    max_examples: int,
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

    interned, topics = _intern_topics(h)
    rows = groupings(interned)
    # Only hash aggregations read it, and each needs the rows of a process together: one
    # exchange and no sort (seq reuse is a count per (process, seq), not a window).
    by_process = rows[BY_PROCESS]
    by_process = by_process if small else by_process.repartition(*BY_PROCESS)
    observed = shuffled(rows[BY_TP], *BY_TP, order=["offset"])
    try:
        frames = _rules(interned, by_process, observed, _values(rows[BY_VALUE]), keep)
        instances = keep(reduce(DataFrame.union, [_instances(n, frames[n]) for n in R.ANOMALIES]))
        return _collect(spark, files, h, topics, frames, instances, guarantee, max_examples)
    finally:
        for frame in cached:
            _release(frame)


def _rules(
    h: DataFrame,
    by_process: DataFrame,
    observed: DataFrame,
    values: DataFrame,
    keep: Callable[[DataFrame], DataFrame],
) -> dict[str, DataFrame]:
    """Every rule's instances, plus the validation problems ("1-op" and so on) and stats."""
    reads = observed.where("read")
    ops = keep(_ops(by_process))
    # Whether an observed offset holds two or more values, from the range of two hashes of
    # them: one hash aggregation over numbers, no strings shuffled or grouped.
    tpo = keep(
        observed.where(F.col("read") | F.col("known"))
        .groupBy(*TPO)
        .agg(*map(F.expr, sql.TPO_AGGREGATES))
    )
    highest = keep(
        tpo.groupBy(*TP).agg(F.max(F.when(F.col("read"), F.col("offset"))).alias("max_read_offset"))
    )
    # Of the millions of read pairs and values, the rules want a few: each set is picked out
    # in one pass and kept, so that the rules read only those.
    back = F.col("offset") <= F.col("previous_offset")
    skip = (F.col("offset") > F.col("previous_offset")) & (F.col("observed_between") > 0)
    pairs = keep(_read_pairs(observed, keep).where(back | skip))
    backwards, skips = pairs.where(back), pairs.where(skip)
    values = keep(values)
    reused_seqs = by_process.groupBy("process", "seq").count().where(F.col("count") > 1)
    value_problem = F.expr(
        sql.message(history.VALUE_REUSED, value=sql.Sql("value"), sends=sql.Sql("invokes"))
    )
    stats = keep(_stats(h))
    return {
        "lost_write": _unread(values, highest, lost=True),
        "unseen": _unread(values, highest, lost=False),
        "duplicate": _by_value(values, (F.col("invokes") > 0) & (F.col("places") > 1)),
        "inconsistent_offset": tpo.where("several").withColumn("sel_tpo", F.struct(*TPO)),
        "aborted_read": _by_value(values, F.col("read") & F.col("failed")),
        "phantom_read": _by_value(values, F.col("read") & (F.col("invokes") == 0)),
        "nonmonotonic_send": _nonmonotonic_sends(ops),
        "nonmonotonic_poll": backwards,
        "poll_skip": skips,
        "commit_regression": _commit_regressions(by_process),
        "group_exclusivity": _group_exclusivity(reads),
        "redelivery": _redeliveries(reads),
        "0-row": stats.select("bad_rows").where("bad_rows > 0"),
        "1-op": ops.where(F.col("problem").isNotNull()).select(
            "process", "op", "problem", "at_completion"
        ),
        "2-seq": reused_seqs.select("process", "seq"),
        "3-value": values.where(F.col("invokes") > 1).select(
            "value", value_problem.alias("problem")
        ),
        "stats": stats.drop("bad_rows"),
        "processes": ops.select("process").distinct().agg(F.count(F.lit(1)).alias("processes")),
        "topic_partitions": highest.agg(F.count(F.lit(1)).alias("topic_partitions")),
    }


def _collect(
    spark: SparkSession,
    files: list[Path],
    h: DataFrame,
    topics: list[str],
    frames: dict[str, DataFrame],
    instances: DataFrame,
    guarantee: str,
    max_examples: int,
) -> R.CheckResult:
    """One job for every count, the first examples, the stats and the first problem; then one
    for the examples' rows, unless the history is malformed."""
    ranked = instances.withColumn(
        "rank", F.row_number().over(Window.partitionBy("name").orderBy("key"))
    ).where(F.col("rank") <= max_examples)
    errors = ["0-row", "1-op", "2-seq", "3-value"]
    parts = [
        _as_result("count", instances.groupBy("name").count(), F.col("name"), "count"),
        _as_result("example", ranked, F.col("name"), "rank", "fields", "select"),
        *[
            _as_result("stats", frames[n], F.lit(None), "*")
            for n in ("stats", "processes", "topic_partitions")
        ],
        *[
            _as_result("error", frames[n].agg(F.min(F.struct("*")).alias("e")), F.lit(n), "e")
            for n in errors
        ],
    ]
    found: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for row in reduce(DataFrame.union, parts).collect():
        found.setdefault(row["kind"], []).append((row["name"], json.loads(row["payload"])))
    _raise_first(spark, files, h, {kind: p["e"] for kind, p in found["error"] if p["e"]})

    def named_topic(value: dict[str, Any]) -> dict[str, Any]:
        return {
            **value,
            "topic": topics[value["topic"]] if value["topic"] is not None else None,
        }

    def named(value: dict[str, Any] | None) -> dict[str, Any] | None:
        return value and named_topic(value)

    examples = sorted(found.get("example", []), key=lambda item: (item[0], item[1]["rank"]))
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
    for (name, payload), rows in zip(examples, context, strict=True):
        fields = {k: payload["fields"][k] for k in R.EXAMPLE_FIELDS[name]}
        if "topic" in fields:
            fields = named_topic(fields)
        anomalies[name].examples.append({**fields, "rows": rows})
    stats = {k: v for _, payload in found["stats"] for k, v in payload.items()}
    return R.CheckResult(guarantee=guarantee, anomalies=anomalies, stats=stats)


# ---------------------------------------------------------------------------------------------
# What the HTML report plots


def report_data(
    spark: SparkSession, directory: str | os.PathLike[str], result: R.CheckResult, **bounds: int
) -> R.ReportData:
    """What the HTML report plots (harness.checker.plots), from the history as a view."""
    if result.stats["first_time_ns"] is None:
        return R.ReportData(1, [], [], [])
    with _history(spark, directory) as (_, h, _):
        h.createOrReplaceTempView("history")
        try:
            return plots.report_data(spark, result, **bounds)
        finally:
            spark.catalog.dropTempView("history")
