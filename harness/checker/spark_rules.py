"""The anomaly rules of docs/history.md as Spark DataFrames: the part of the engine that judges.

Mirrors harness.checker.rules, the pure-Python reference the property test holds this engine
to, rule for rule and mostly name for name, so the two read side by side. The history is
shuffled three ways, each once (groupings): by process (operations, send order), by
topic-partition (offsets, read runs, groups) and by value (what became of each send); every
rule is computed inside one of them, save seq reuse (a count per (process, seq)). Each rule
yields one row per anomaly with its example fields and selectors (sel_*) naming the rows that
give the example context.

Kept apart from reading the history (spark_load) and from running the check and collecting
its results (harness.checker.spark): what is here describes jobs without running them, save
the small one that lists the topic names to intern, and never sees a file. One of the Spark
engine's modules, so it may import pyspark.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from harness import history
from harness.checker import result as R
from harness.checker import spark_rules_txn as txn_rules
from harness.checker import sql

TP = ["topic", "partition"]
TPO = [*TP, "offset"]
COMMIT = ["group", *TP, "time_ns", "process", "seq"]


def _is_read() -> Column:
    return F.expr(sql.IS_READ)


def _is_known() -> Column:
    return F.expr(sql.IS_KNOWN)


# ---------------------------------------------------------------------------------------------
# The groupings: the three shuffles every rule runs inside


def intern_topics(h: DataFrame) -> tuple[DataFrame, list[str], bool, DataFrame]:
    """The history with each topic replaced by its rank among the topic names: numbers shuffle,
    hash and aggregate far cheaper than strings, and rank order is name order. The same small
    job tells whether the history is transactional (spark_rules_txn.has_transactions), which
    decides whether the rules pay for transactions at all, and takes the history's stats and
    bad rows (sql.stats) per topic, combined from those few rows (sql.STATS_COMBINED): one scan
    of every row fewer than a job of their own."""
    found = h.groupBy("topic").agg(
        F.max(txn_rules.has_transactions()).alias("txn"), *map(F.expr, sql.stats())
    ).collect()
    topics = sorted(r["topic"] for r in found if r["topic"] is not None)
    ids = F.create_map(*[F.lit(x) for i, t in enumerate(topics) for x in (t, i)])
    interned = F.try_element_at(ids, F.col("topic")) if topics else F.lit(None)
    per_topic = h.sparkSession.createDataFrame(
        [[r[name] for name in sql.STATS_NAMES] for r in found],
        ", ".join(f"{name} bigint" for name in sql.STATS_NAMES),
    )
    stats = per_topic.agg(*map(F.expr, sql.STATS_COMBINED)).selectExpr(*sql.STATS_DERIVED)
    return (
        h.withColumn("topic", interned.cast("long")), topics, any(r["txn"] for r in found), stats
    )


BY_PROCESS, BY_TP, BY_VALUE = ("process",), ("topic", "partition"), ("value",)


def groupings(
    annotated: DataFrame, run_ends: DataFrame | None
) -> dict[tuple[str, ...], DataFrame]:
    """The three ways the rules group the history, by their keys, with what each ships: every
    row by process (operations, send order, commits, seq reuse), the observed rows and consumer
    runs by topic-partition, and the sends and reads by value. Each needs an exchange of its
    own, so the benchmark ships these three and computes nothing as its bound: what the check
    moves before any rule runs (ci/bench_checker.py). The rows are annotated
    (spark_rules_txn.annotate); run_ends (the completion rows of failed transactions, per t/p
    read inside them) join the consumer runs they end."""
    send_or_read = (F.col("f") == "send") | _is_read()
    observed = annotated.where(
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
        F.expr(sql.IS_ASSIGN).alias("assigned"),
        F.expr(sql.IS_LOST).alias("lost"),
        F.expr(sql.IS_CONSUMER_PROTOCOL).alias("consumer_protocol"),
        "counts",
        "rc",
        "vcommitted",
    )
    if run_ends is not None:
        observed = observed.unionByName(run_ends.select(
            "process", "seq", "op", *TP, F.lit(None).cast("long").alias("offset"),
            *[F.lit(None).cast("long").alias(v) for v in ("v0", "v1")],
            F.lit(None).cast("string").alias("group"), F.lit(-1).alias("generation"),
            "time_ns",
            *[F.lit(False).alias(c) for c in ("read", "known", "assigned", "lost",
                                              "consumer_protocol")],
            F.lit(True).alias("counts"), F.lit(False).alias("rc"),
            F.lit(False).alias("vcommitted"),
        ))
    return {
        BY_PROCESS: annotated.selectExpr(*sql.by_process()),
        BY_TP: observed,
        BY_VALUE: annotated.where(send_or_read & F.col("value").isNotNull()).select(
            "value", "f", "type", *TPO, "op", "counts", "rc", "vcommitted", "vtxn_fail"
        ),
    }


# ---------------------------------------------------------------------------------------------
# The rules and the validation they share the shuffles with (their namesakes in rules.py)


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
    # Exchanged as they are, and aggregated after: aggregated before the exchange too, the
    # rows shrank 2.5 times (a value is a send and its reads) for more hashing than the bytes
    # saved (1.2 executor CPU-s of 9.7 at 10M rows, docs/benchmarks.md).
    return (
        value_rows.repartition("value").groupBy("value")
        .agg(*map(F.expr, sql.value_aggregates()))
        .selectExpr("*", sql.PLACES)
        .where(sql.VALUE_OF_NOTE)
    )


def _by_value(values: DataFrame, condition: Column) -> DataFrame:
    return values.where(condition).select("value", F.col("value").alias("sel_value"))


def _unread(values: DataFrame, highest: DataFrame, lost: bool) -> DataFrame:
    """Committed values at a known place that no counting poll read."""
    unread = F.col("op").isNotNull() & ~F.col("counted_read") & F.col("committed")
    sent = values.where(unread).select("value", *TPO, "op")
    joined = sent.join(highest, TP, "left")
    past = F.coalesce(F.col("max_read_offset") > F.col("offset"), F.lit(False))
    return joined.where(past if lost else ~past).withColumn("sel_ops", F.array("op"))


def _read_pairs(
    observed: DataFrame, keep: Callable[[DataFrame], DataFrame], cranks: DataFrame | None
) -> DataFrame:
    """Consecutive reads of a t/p by a process inside one run (ended by assign or revoke, or a
    failed transaction's completion row). Each read carries the dense rank of its offset among
    the t/p's observed offsets, so the observed offsets strictly between a pair are a difference
    of ranks, not a join. The ranked reads are kept between the two windows: a t/p is one window
    partition of each, and the first one's buffer and the second one's sort in one task are more
    than a task's memory at 100M rows.

    A transactional history also ranks the offsets where a committed value is observed (cranks:
    per observed t/p/o, how many such offsets are at or below it), for read_committed pairs,
    which skip the others legitimately."""
    ranked = observed.selectExpr("*", sql.OFFSET_RANK).where(~F.col("known"))
    if cranks is None:
        ranked = ranked.withColumns({"crank": F.lit(0), "committed_here": F.lit(False)})
    else:
        ranked = ranked.join(cranks, TPO, "left")
    reads = keep(
        ranked.select("process", *TP, "seq", "offset", "read", "rank", "rc", "crank",
                      F.coalesce("committed_here", F.lit(False)).alias("committed_here"))
    )
    return (
        reads.selectExpr(*sql.lags(sql.READ_ORDER, "read", "offset", "seq", "rank", "rc",
                                   "crank"))
        .where(F.col("read") & F.col("previous_read"))
        .selectExpr(
            "*",
            sql.row_refs(("process", "previous_seq"), ("process", "seq")),
            sql.OBSERVED_BETWEEN,
        )
    )


def _commits(by_process: DataFrame) -> DataFrame:
    """The ok commits of groups that count (COMMIT and offset), from every row by process."""
    return by_process.where(F.col("group").isNotNull()).select(*COMMIT, "offset")


def _commit_regressions(commits: DataFrame) -> DataFrame:
    return (
        commits.selectExpr(*sql.lags(sql.COMMIT_ORDER, "process", "seq", "offset"))
        .where(F.col("offset") < F.col("previous_offset"))
        .selectExpr("*", sql.row_refs(("previous_process", "previous_seq"), ("process", "seq")))
    )


def _group_exclusivity(observed: DataFrame, reads: DataFrame) -> DataFrame:
    return _classic_exclusivity(reads).unionByName(_consumer_protocol_exclusivity(observed))


def _classic_exclusivity(reads: DataFrame) -> DataFrame:
    """Processes of one group whose reads of a t/p in one generation of the classic protocol
    interleave in time: each process's reads span [first, last]; sorted by first (the longer
    span first on a tie, as in rules.py), a process that starts before an earlier one's last
    read overlaps it. A clean hand-over (KIP-345) does not."""
    keys = ["group", "generation", *TP]
    firsts = F.array_sort(F.collect_list(F.struct("process", "seq")))
    by_first = Window.partitionBy(*keys).orderBy("first_ns", F.desc("last_ns"), "process")
    earlier = by_first.rowsBetween(Window.unboundedPreceding, -1)
    return (
        reads.where(
            F.col("group").isNotNull() & (F.col("generation") >= 0) & ~F.col("consumer_protocol")
        )
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


def _consumer_protocol_exclusivity(observed: DataFrame) -> DataFrame:
    """KIP-848's consumer protocol (rules._consumer_protocol_exclusivity): per (group, t/p),
    ownerships of two processes that interleave. An ownership is a process's reads of the t/p
    between its assign rows of it (numbered by a running count over its rows by seq); one in
    which the process lost the t/p is left out. Spans are few (one per assignment), so the
    pairs come from a join of them with themselves."""
    keys = ["group", *TP]
    marked = observed.where(
        ~F.col("known") & (~F.col("read") | (F.col("consumer_protocol")
                                             & F.col("group").isNotNull()))
    ).selectExpr("*", sql.OWNERSHIP)
    lost = marked.where("lost").select("process", *TP, "owned").distinct()
    spans = (
        marked.where("read")
        .groupBy(*keys, "process", "owned")
        .agg(F.min("seq").alias("seq"), F.min("time_ns").alias("first_ns"),
             F.max("time_ns").alias("last_ns"))
        .join(lost, ["process", *TP, "owned"], "left_anti")
    )
    a, b = spans.alias("a"), spans.alias("b")
    pairs = a.join(
        b,
        [F.col(f"a.{k}") == F.col(f"b.{k}") for k in keys]
        + [F.col("a.process") != F.col("b.process"),
           F.col("a.first_ns") <= F.col("b.first_ns"),
           F.col("b.first_ns") < F.col("a.last_ns")],
    )
    involved = reduce(DataFrame.union, [
        pairs.select(*[F.col(f"{side}.{c}").alias(c) for c in (*keys, "process", "seq")])
        for side in ("a", "b")
    ])
    firsts = F.array_sort(F.collect_list(F.struct("process", "seq")))
    return (
        involved.groupBy(*keys, "process")
        .agg(F.min("seq").alias("seq"))
        .groupBy(*keys)
        .agg(
            F.count(F.lit(1)).alias("process_count"),
            F.slice(firsts, 1, R.ROWS_PER_EXAMPLE).alias("sel_rows"),
        )
        .withColumn("generation", F.lit(-1).cast("int"))
        .withColumn("processes", F.transform("sel_rows", lambda r: r["process"]))
    )


def _redeliveries(reads: DataFrame) -> DataFrame:
    keys = ["group", *TPO]
    return (
        reads.where(F.col("group").isNotNull() & F.col("counts"))
        .groupBy(*keys)
        .agg(F.min("op").alias("low"), F.max("op").alias("high"), F.count(F.lit(1)).alias("reads"))
        .where(F.col("low") != F.col("high"))
        .withColumn("sel_gtpo", F.struct(*keys))
    )


# ---------------------------------------------------------------------------------------------
# Every rule at once, in the shape the check collects


# What the by-t/p rules yield, by name: each anomaly's instances, and "highest" (per t/p with
# an observed offset, the highest a counting poll read: max_read_offset), which lost_write and
# unseen judge against. Computed by these SQL rules or by the compiled passes (spark_jvm).
HIGHEST = "highest"
# What the by-process rules also yield: the commits (sql.by_process's rows with a group).
COMMITS = "commits"


def by_topic_partition(
    observed: DataFrame, keep: Callable[[DataFrame], DataFrame], transactional: bool
) -> dict[str, DataFrame]:
    """The by-t/p rules as SQL (HIGHEST, and inconsistent_offset, the read pairs' two rules,
    group_exclusivity and redelivery), over the grouping's rows (observed: each t/p in one
    partition, sorted by offset); the same frames spark_jvm computes with compiled passes."""
    reads = observed.where("read")
    # Whether an observed offset holds two or more values, from the range of two hashes of
    # them: one hash aggregation over numbers, no strings shuffled or grouped.
    tpo = keep(
        observed.where(F.col("read") | F.col("known"))
        .groupBy(*TPO)
        .agg(*map(F.expr, sql.TPO_AGGREGATES))
    )
    highest = tpo.groupBy(*TP).agg(
        F.max(F.when(F.col("counted"), F.col("offset"))).alias("max_read_offset")
    )
    cranks = None
    if transactional:
        cranks = tpo.selectExpr(*TPO, "committed_here", sql.COMMITTED_RANK)
    # Of the millions of read pairs, the rules want a few: they are picked out in one pass and
    # kept, so that the rules read only those.
    back = F.col("offset") <= F.col("previous_offset")
    skip = (F.col("offset") > F.col("previous_offset")) & (F.col("observed_between") > 0)
    pairs = keep(_read_pairs(observed, keep, cranks).where(back | skip))
    return {
        HIGHEST: keep(highest),
        "inconsistent_offset": tpo.where("several").withColumn("sel_tpo", F.struct(*TPO)),
        "nonmonotonic_poll": pairs.where(back),
        "poll_skip": pairs.where(skip),
        "group_exclusivity": _group_exclusivity(observed, reads),
        "redelivery": _redeliveries(reads),
    }


def by_process_rules(by_process: DataFrame, keep: Callable[[DataFrame], DataFrame]
                     ) -> dict[str, DataFrame]:
    """The by-process rules as SQL, over every row by process: nonmonotonic_send, the
    operations' problems ("1-op"), seq reuse ("2-seq"), the process count, and the commits
    (commit regressions judge them by (group, t/p): they are few); the same frames spark_jvm
    computes with compiled passes."""
    ops = keep(_ops(by_process))
    reused_seqs = by_process.groupBy("process", "seq").count().where(F.col("count") > 1)
    return {
        "nonmonotonic_send": _nonmonotonic_sends(ops),
        "1-op": ops.where(F.col("problem").isNotNull()).select(
            "process", "op", "problem", "at_completion"
        ),
        "2-seq": reused_seqs.select("process", "seq"),
        "processes": ops.select("process").distinct().agg(F.count(F.lit(1)).alias("processes")),
        COMMITS: _commits(by_process),
    }


def rule_frames(
    stats: DataFrame,
    rules: dict[str, DataFrame],
    value_rows: DataFrame,
    keep: Callable[[DataFrame], DataFrame],
    annotated: txn_rules.Annotated,
) -> dict[str, DataFrame]:
    """Every rule's instances (g1c's edges are collected apart: spark_rules_txn.g1c), plus the
    validation problems ("1-op" and so on) and stats, from the history's stats (intern_topics'),
    its by-value grouping (value_rows, as shipped), the by-t/p and by-process rules' frames
    (by_topic_partition's and by_process_rules', or spark_jvm's) and its transactions."""
    highest = rules[HIGHEST]
    # Of the millions of values, the rules want a few: picked out in one pass and kept.
    values = keep(_values(value_rows))
    value_problem = F.expr(
        sql.message(history.VALUE_REUSED, value=sql.Sql("value"), sends=sql.Sql("invokes"))
    )
    return {
        "lost_write": _unread(values, highest, lost=True),
        "unseen": _unread(values, highest, lost=False),
        "duplicate": _by_value(values, (F.col("invokes") > 0) & (F.col("places") > 1)),
        "aborted_read": _by_value(values, F.col("read") & (F.col("failed") | F.col("g1a"))),
        "phantom_read": _by_value(values, F.col("read") & (F.col("invokes") == 0)),
        "commit_regression": _commit_regressions(rules[COMMITS]),
        **{name: frame for name, frame in rules.items() if name not in (HIGHEST, COMMITS)},
        **txn_rules.rule_frames(annotated),
        "0-row": stats.select("bad_rows").where("bad_rows > 0"),
        "3-value": values.where(F.col("invokes") > 1).select(
            "value", value_problem.alias("problem")
        ),
        "stats": stats.drop("bad_rows"),
        "topic_partitions": highest.agg(F.count(F.lit(1)).alias("topic_partitions")),
        "txn_stats": txn_rules.stats(annotated),
    }


def _instances(name: str, frame: DataFrame) -> DataFrame:
    """One anomaly's instances in the shape shared by all, so one job ranks and counts them.
    Written as SQL expressions: one call to the JVM instead of hundreds of column objects."""
    return frame.selectExpr(*sql.instance(name, set(frame.columns)))


# Anomalies judged on the driver, not by the one job that counts the others.
ON_DRIVER = ("g1c",)


def all_instances(frames: dict[str, DataFrame]) -> DataFrame:
    """Every anomaly's instances (rule_frames' rows of R.ANOMALIES) as one frame, in as many
    partitions as an exchange makes: a union has all its parts' partitions (13 rules' 8 each
    at 10M rows), and each task of every stage that reads it costs more than its few rows."""
    names = [n for n in R.ANOMALIES if n not in ON_DRIVER]
    union = reduce(DataFrame.union, [_instances(n, frames[n]) for n in names])
    partitions = union.sparkSession.conf.get("spark.sql.shuffle.partitions")
    return union.coalesce(int(partitions)) if partitions else union
