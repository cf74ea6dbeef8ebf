"""The by-topic-partition and by-process rules as compiled passes (harness/checker/jvm), on a
classic session.

The same rules as spark_rules.by_topic_partition and spark_rules.by_process_rules, in the
frames they yield (the shapes sql.instance takes), each computed by two Java passes over its
grouping's rows instead of SQL windows, joins and aggregations: with them a 10M-row check
costs about half the executor CPU (docs/benchmarks.md). Only a classic session can run them
(a Spark Connect client cannot call JVM code), and only one whose JVM started with the
passes' jar (jvm_passes, put on its class path by spark_session); any other session judges
with the SQL rules, held equal to these by the property tests. One of the Spark engine's
modules, so it may import pyspark.
"""

from __future__ import annotations

from collections.abc import Callable

from py4j.java_gateway import JavaClass
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from harness import history
from harness.checker import jvm_passes, sql
from harness.checker import result as R
from harness.checker.spark_rules import COMMIT, COMMITS, HIGHEST, TP, TPO
from harness.checker.spark_session import is_connect, jvm_class

# What each rule's frame keeps of the passes' result rows (the Java Results' columns).
_PAIR = ["process", *TP, "seq", "offset", "previous_seq", "previous_offset", "sel_rows"]
_COLUMNS = {
    HIGHEST: [*TP, "max_read_offset"],
    "inconsistent_offset": TPO,
    "nonmonotonic_poll": _PAIR,
    "poll_skip": [*_PAIR, "observed_between"],
    "group_exclusivity": ["group", "generation", *TP, "process_count", "sel_rows", "processes"],
    "redelivery": ["group", *TPO, "reads"],
}


def _entry(spark: SparkSession, name: str) -> JavaClass:
    found = jvm_class(spark, name)
    if found is None:
        raise RuntimeError("this Spark session's JVM has no checker passes on its class path")
    return found


def available(spark: SparkSession) -> bool:
    """Whether this session can run the passes: classic, its JVM started with their jar."""
    return not is_connect(spark) and jvm_class(spark, jvm_passes.ENTRY) is not None


def _results(frame: DataFrame, hold: Callable[[DataFrame], DataFrame], name: str,
             *args: int) -> DataFrame:
    """One pass class's result frame, held: it is small (a row per t/p or process and per
    instance), and every rule's frame reads it."""
    entry = _entry(frame.sparkSession, name)
    return hold(DataFrame(entry.results(frame._jdf, *args), frame.sparkSession))


def by_topic_partition(
    observed: DataFrame, hold: Callable[[DataFrame], DataFrame]
) -> dict[str, DataFrame]:
    """spark_rules.by_topic_partition's frames from the passes' one result frame, held (it is
    small: a row per t/p and per anomaly). `observed` is the grouping's rows, each t/p in one
    partition, sorted by topic, partition and offset."""
    found = _results(observed, hold, jvm_passes.ENTRY, R.ROWS_PER_EXAMPLE)
    frames = {
        name: found.where(F.col("rule") == name).select(*columns)
        for name, columns in _COLUMNS.items()
    }
    frames["inconsistent_offset"] = frames["inconsistent_offset"].withColumn(
        "sel_tpo", F.struct(*TPO)
    )
    frames["redelivery"] = frames["redelivery"].withColumn("sel_gtpo", F.struct("group", *TPO))
    return frames


def by_process(by_process: DataFrame, hold: Callable[[DataFrame], DataFrame]
               ) -> dict[str, DataFrame]:
    """spark_rules.by_process_rules' frames from the process passes' result frame (Java's
    ProcessPass). `by_process` is the grouping's rows, each process in one partition, sorted
    by process, op and seq. The passes pick out the operations that may be malformed; whether
    one is, and in what words, is sql.op_problem's, as on the SQL path."""
    found = _results(by_process, hold, jvm_passes.PROCESS_ENTRY, sql.F_CODES["send"],
                     _bits(history.INVOKED), _bits(history.ONE_COMPLETION))

    def rule(name: str) -> DataFrame:
        return found.where(F.col("rule") == name)

    problem, at_completion = sql.op_problem()
    return {
        "nonmonotonic_send": rule("nonmonotonic_send").select(
            "process", *TP, "seq", "offset", "previous_offset", "op", "previous_op", "sel_ops"
        ),
        "1-op": rule("op")
        .selectExpr("process", "op", f"{problem} AS problem", f"{at_completion} AS at_completion")
        .where(F.col("problem").isNotNull()),
        "2-seq": rule("seq_reused").select("process", "seq"),
        "processes": rule("process").agg(F.count(F.lit(1)).alias("processes")),
        COMMITS: rule("commit").select(*COMMIT, "offset"),
    }


def _bits(fs: tuple[str, ...]) -> int:
    """The fs as one mask of sql.F_CODES' bits."""
    return sum(sql.F_CODES[f] for f in set(fs))
