"""The history as a Spark DataFrame, and a bad row of it back as a file and line.

The Spark engine's reading side: the history's Parquet and JSONL files as one DataFrame of
rows, each with its position (file, split, row) because Spark keeps no line numbers; Spark tuned
to the history's size and its failures made SparkError; and, when validation finds a malformed
history, the first problem raised at its line as the pure reader would. Kept apart from the
rules (harness.checker.spark_rules) because where a row came from and how it is decoded is no
concern of theirs: they see the rows, never the files. One of the Spark engine's modules, so it
may import pyspark.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from functools import reduce
from pathlib import Path

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from harness import history
from harness.checker import cluster, sql
from harness.checker.spark_session import SparkError, is_connect

_SPARK_TYPES = {"string": T.StringType(), "int64": T.LongType(), "int32": T.IntegerType()}
# Every column of an Event: Parquet files written before an optional column existed read it as
# null, as the pure reader does (history.OPTIONAL_COLUMNS).
SCHEMA = T.StructType(
    [T.StructField(c.name, _SPARK_TYPES[c.kind]) for c in history.EVENT_COLUMNS]
)
_DECODED = T.StructType([*SCHEMA.fields, T.StructField("_problem", T.StringType())])
NAMES = list(history.COLUMN_NAMES)


def release(frame: DataFrame) -> None:
    """Drop a cached frame; after a failure that stopped Spark there is nothing to drop, and
    saying so would hide the failure."""
    with suppress(Py4JError, PySparkException):
        frame.unpersist()


# ---------------------------------------------------------------------------------------------
# Reading: the files as rows with their positions, and a history opened for the engine


def _jsonl_lines(spark: SparkSession, paths: list[str]) -> DataFrame:
    # Line numbers exist only as positions: a line is its split (file, block start) and its
    # monotonically increasing id, whose order within a split is the file's order.
    return spark.read.text(paths).select(
        "value",
        F.col("_metadata.file_name").alias("_file"),
        F.col("_metadata.file_block_start").alias("_block"),
        F.monotonically_increasing_id().alias("_row"),
    )


def load(spark: SparkSession, files: list[Path]) -> DataFrame:
    parquet = [str(p) for p in files if p.suffix == ".parquet"]
    jsonl = [str(p) for p in files if p.suffix == ".jsonl"]
    parts = []
    if parquet:
        parts.append(
            spark.read.schema(SCHEMA)
            .parquet(*parquet)
            .select(
                *NAMES,
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
                *[F.col(f"r.{n}").alias(n) for n in NAMES],
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


@contextmanager
def open_history(
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
        h = load(spark, files)
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
            release(h)
    except (Py4JError, PySparkException) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SparkError(f"Spark job failed: {reason}") from exc


# ---------------------------------------------------------------------------------------------
# Where a bad row is: the pure reader's first problem, at its file and line


def _single_row(aggregation: DataFrame) -> Row:
    """The one row of a global aggregation, which Spark returns even for no input rows."""
    row = aggregation.first()
    if row is None:
        raise SparkError("Spark returned no row for a global aggregation")
    return row


def _when_count(condition: Column) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0))


def raise_first(spark: SparkSession, files: list[Path], h: DataFrame, errors: dict) -> None:
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
