"""The transaction rules of docs/history.md ("Transactions") as Spark DataFrames.

Mirrors harness.checker.rules_txn, the pure-Python reference, for the Spark engine
(harness.checker.spark_rules). Two parts, as there:

- annotate() gives every row what the Terms say of it: whether it counts (no transaction, or
  one that committed), whether it is a read_committed poll, and of a send's or poll's value
  whether it is committed and whether its transaction failed. The rules written before
  transactions read these columns to narrow themselves. A history with no transaction column
  set and no txn row gets them as constants, with no join: its plan is the plan it had before,
  and the rules below are empty frames.
- the five rules transactions add, and the transaction stats. They run on the annotated rows
  of sends and reads: their own shuffles, paid only by a transactional history (any other gets
  empty frames of their shape: even pruned, their plans cost Spark's planner seconds). g1c collects
  its few transaction-to-transaction edges to the driver, where rules_txn.g1c_cycles (the one
  implementation of components and explanations) runs.

One of the Spark engine's modules, so it may import pyspark.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from harness.checker import sql
from harness.checker.rules_txn import TXN, Cycle, Outcome, Witness, g1c_cycles
from harness.history import READ_COMMITTED

TP = ["topic", "partition"]
TPO = [*TP, "offset"]
# What annotate() adds to every row (see its docstring).
ANNOTATIONS = ("counts", "rc", "vtxn", "vcommitted", "vtxn_fail", "vdone_ns")
# The shapes of what a history without transactions gets instead of computing it.
_SHAPES = {
    "txns": "txn bigint, begun boolean, outcome string, seen boolean, done_ns bigint, "
    "committed boolean",
    "precommitted_read": "value string, txn bigint, sel_value string",
    "torn_transaction": "txn bigint, topic bigint, partition int, offset bigint, value string, "
    "op bigint, sel_ops array<bigint>",
    "double_processed": "group string, value string, outputs bigint, records bigint, "
    "sel_ops array<bigint>",
    "unprocessed": "group string, value string, topic bigint, partition int, offset bigint, "
    "max_processed_offset bigint, "
    "sel_gtpo struct<group:string,topic:bigint,partition:int,offset:bigint>",
}


def _empty(like: DataFrame, shape: str) -> DataFrame:
    return like.sparkSession.createDataFrame([], _SHAPES[shape])


def has_transactions() -> Column:
    """Whether a row makes the history transactional: the contract's rules change "when any
    row has a non-null txn, isolation or derived_from"; a txn row alone also makes stats."""
    return (
        F.col("txn").isNotNull()
        | F.col("isolation").isNotNull()
        | F.col("derived_from").isNotNull()
        | (F.col("f") == TXN)
    )


def _is_read() -> Column:
    return F.expr(sql.IS_READ)


def _send_or_read() -> Column:
    return ((F.col("f") == "send") | _is_read()) & F.col("value").isNotNull()


@dataclass
class Annotated:
    rows: DataFrame  # every row, with ANNOTATIONS
    txns: DataFrame  # per transaction: txn, begun, outcome, committed, seen, done_ns
    on: bool  # whether the history is transactional


def annotate(interned: DataFrame, on: bool) -> Annotated:
    """The Terms, per row (rules_txn.Transactions): see the module's docstring."""
    if not on:
        # No row has an isolation, so no poll is read_committed: a constant the optimizer
        # folds through every rule that asks (read pairs, g1a), as the others are.
        constants = {
            "rc": F.lit(False),
            "counts": F.lit(True),
            "vtxn": F.lit(None).cast("long"),
            "vcommitted": (F.col("f") == "send") & (F.col("type") == "ok"),
            "vtxn_fail": F.lit(False),
            "vdone_ns": F.lit(None).cast("long"),
        }
        return Annotated(interned.withColumns(constants), _empty(interned, "txns"), False)
    rows = interned.withColumn("rc", F.coalesce(F.col("isolation") == READ_COMMITTED, F.lit(False)))
    per_value = (
        rows.where(_send_or_read())
        .groupBy("value")
        .agg(*map(F.expr, sql.TXN_VALUE_AGGREGATES))
        .selectExpr("*", sql.SEEN_OUTSIDE)
    )
    txns = _transactions(rows, per_value)
    values = per_value.join(
        txns.select(
            F.col("txn").alias("vtxn"),
            F.col("committed").alias("vtxn_committed"),
            (F.col("outcome") == Outcome.FAIL.value).alias("vtxn_fail"),
            F.col("done_ns").alias("vdone_ns"),
        ),
        "vtxn",
        "left",
    ).select(
        F.col("value").alias("_value"),
        "vtxn",
        (F.col("sent_ok") & (F.col("vtxn").isNull() | F.coalesce("vtxn_committed", F.lit(False))))
        .alias("vcommitted"),
        F.coalesce("vtxn_fail", F.lit(False)).alias("vtxn_fail"),
        "vdone_ns",
    )
    joined = rows.join(
        values, (F.col("value") == F.col("_value")) & _send_or_read(), "left"
    ).drop("_value")
    committed = txns.where("committed").select(F.col("txn").alias("_txn"), F.lit(True).alias("_c"))
    counted = joined.join(committed, F.col("txn") == F.col("_txn"), "left").select(
        *[c for c in joined.columns if c not in ("vcommitted", "vtxn_fail")],
        (F.col("txn").isNull() | F.col("_c").isNotNull()).alias("counts"),
        F.coalesce("vcommitted", F.lit(False)).alias("vcommitted"),
        F.coalesce("vtxn_fail", F.lit(False)).alias("vtxn_fail"),
    )
    return Annotated(counted, txns, True)


def _transactions(rows: DataFrame, per_value: DataFrame) -> DataFrame:
    """Per transaction (an f=txn op, or a txn some value names): whether it began (has an
    invoke row), its outcome (info without a completion row), whether a read_committed poll
    outside it read one of its values, when its last send completed, and whether it committed."""
    begun = rows.where((F.col("f") == TXN) & (F.col("type") == "invoke")).select(
        F.col("op").alias("txn"), F.lit(True).alias("begun")
    )
    ends = rows.where((F.col("f") == TXN) & (F.col("type") != "invoke")).select(
        F.col("op").alias("txn"), F.col("type").alias("outcome")
    )
    seen = (
        per_value.where(F.col("vtxn").isNotNull())
        .groupBy(F.col("vtxn").alias("txn"))
        .agg(F.max("outside").alias("seen"), F.max("done_ns").alias("done_ns"))
    )
    outcome = F.coalesce("outcome", F.lit(Outcome.INFO.value))
    return (
        begun.join(ends, "txn", "full")
        .join(seen, "txn", "full")
        .select(
            "txn",
            F.coalesce("begun", F.lit(False)).alias("begun"),
            outcome.alias("outcome"),
            F.coalesce("seen", F.lit(False)).alias("seen"),
            "done_ns",
        )
        .withColumn(
            "committed",
            (F.col("outcome") == Outcome.OK.value)
            | ((F.col("outcome") == Outcome.INFO.value) & F.col("seen")),
        )
    )


def run_ends(a: Annotated) -> DataFrame | None:
    """Per (process, t, p) its process read inside a failed transaction: the transaction's
    completion row (process, seq, time_ns), which ends the process's run of reads there. None
    for a history without transactions, whose runs only assign and revoke end."""
    if not a.on:
        return None
    rows = a.rows
    fails = rows.where((F.col("f") == TXN) & (F.col("type") == Outcome.FAIL.value)).select(
        "process", F.col("op").alias("txn"), "seq", "time_ns"
    )
    read_in = rows.where(_is_read() & F.col("txn").isNotNull()).select(
        "process", "txn", *TP
    ).distinct()
    return read_in.join(fails, ["process", "txn"]).select(
        "process", "seq", F.col("txn").alias("op"), *TP, "time_ns"
    )


def stats(a: Annotated) -> DataFrame:
    """txns, txns_committed, txns_aborted, txns_unknown: of the transactions that began."""
    if not a.on:
        shape = "txns bigint, txns_committed bigint, txns_aborted bigint, txns_unknown bigint"
        return a.rows.sparkSession.createDataFrame([(0, 0, 0, 0)], shape)
    begun = a.txns.where("begun")
    counts = begun.agg(
        F.count(F.lit(1)).alias("txns"),
        F.count(F.when(F.col("committed"), 1)).alias("txns_committed"),
        F.count(F.when(F.col("outcome") == Outcome.FAIL.value, 1)).alias("txns_aborted"),
    )
    return counts.selectExpr("*", "txns - txns_committed - txns_aborted AS txns_unknown")


# ---------------------------------------------------------------------------------------------
# The rules transactions add (their namesakes in rules_txn.py)


def _value_rows(a: Annotated) -> DataFrame:
    return a.rows.where(_send_or_read()).select(
        "value", "f", "type", *TPO, "op", "process", "seq", "time_ns", "txn", "group",
        "derived_from", _is_read().alias("read"), F.expr(sql.IS_KNOWN).alias("known"),
        *ANNOTATIONS,
    )


def precommitted_reads(value_rows: DataFrame) -> DataFrame:
    """Values a read_committed poll read inside their own transaction, or before the last of
    its sends completed."""
    early = (
        F.col("read") & F.col("rc") & F.col("vtxn").isNotNull()
        & (F.coalesce(F.col("txn") == F.col("vtxn"), F.lit(False))
           | F.coalesce(F.col("time_ns") < F.col("vdone_ns"), F.lit(False)))
    )
    return (
        value_rows.where(early)
        .groupBy("value")
        .agg(F.max("vtxn").alias("txn"))
        .withColumn("sel_value", F.col("value"))
    )


def torn_transactions(value_rows: DataFrame) -> DataFrame:
    """Committed transactions one of whose ok sends a counting read_committed poll read while
    another, at a known offset, no such poll read though one read past it."""
    seen = value_rows.where(F.col("read") & F.col("rc") & F.col("counts"))
    seen_values = seen.select("value").distinct()
    highest = seen.groupBy(*TP).agg(F.max("offset").alias("rc_highest"))
    sends = value_rows.where(
        (F.col("f") == "send") & (F.col("type") == "ok") & F.col("vtxn").isNotNull()
    )
    read_txns = sends.join(seen_values, "value", "left_semi").select(
        F.col("vtxn").alias("read_txn")
    ).distinct()
    unread = (
        sends.where(F.col("known") & F.col("vcommitted"))
        .join(seen_values, "value", "left_anti")
        .join(highest, TP)
        .where(F.col("rc_highest") > F.col("offset"))
        .join(read_txns, F.col("vtxn") == F.col("read_txn"), "left_semi")
    )
    first = F.min(F.struct(*TPO, "value", "op")).alias("m")
    return (
        unread.groupBy(F.col("vtxn").alias("txn"))
        .agg(first)
        .select("txn", *[F.col(f"m.{c}").alias(c) for c in (*TPO, "value", "op")])
        .withColumn("sel_ops", F.array("txn", "op"))
    )


def processing(value_rows: DataFrame) -> tuple[DataFrame, DataFrame]:
    """double_processed and unprocessed, per (group, input value): an input of g is a
    committed value a poll of g read, an output of g a committed send of g derived from one.
    A value's records are its distinct observed places (a read, or an ack at a known offset):
    double_processed needs more committed outputs than records, as rules_txn.processing."""
    outputs = value_rows.where(
        (F.col("f") == "send") & (F.col("type") == "ok") & F.col("group").isNotNull()
        & F.col("derived_from").isNotNull() & F.col("vcommitted")
    ).groupBy("group", F.col("derived_from").alias("value")).agg(
        F.count(F.lit(1)).alias("outputs"), F.collect_list("op").alias("sel_ops")
    )
    inputs = value_rows.where(
        F.col("read") & F.col("group").isNotNull() & F.col("vcommitted")
    ).select("group", "value", *TPO).distinct()
    keys = ["group", "value"]
    records = (
        value_rows.where(F.col("read") | F.col("known")).select("value", *TPO).distinct()
        .groupBy("value").agg(F.count(F.lit(1)).alias("observed"))
    )
    doubles = (
        outputs.where(F.col("outputs") > 1).join(inputs.select(*keys), keys, "left_semi")
        .join(records, "value", "left")
        .withColumn("records", F.greatest(F.coalesce(F.col("observed"), F.lit(0)), F.lit(1)))
        .where(F.col("outputs") > F.col("records"))
        .drop("observed")
    )
    done = (
        inputs.join(outputs, keys, "left_semi")
        .groupBy("group", *TP)
        .agg(F.max("offset").alias("max_processed_offset"))
    )
    first = F.min(F.struct(*TPO, "max_processed_offset")).alias("m")
    undone = (
        inputs.join(outputs, keys, "left_anti")
        .join(done, ["group", *TP])
        .where(F.col("offset") < F.col("max_processed_offset"))
        .groupBy(*keys)
        .agg(first)
        .select(*keys, *[F.col(f"m.{c}").alias(c) for c in (*TPO, "max_processed_offset")])
        .withColumn("sel_gtpo", F.struct("group", *TPO))
    )
    return doubles, undone


def rule_frames(a: Annotated) -> dict[str, DataFrame]:
    """The instance frames of precommitted_read, torn_transaction, double_processed and
    unprocessed (g1c runs on the driver: g1c)."""
    if not a.on:
        names = ("precommitted_read", "torn_transaction", "double_processed", "unprocessed")
        return {name: _empty(a.rows, name) for name in names}
    value_rows = _value_rows(a)
    doubles, undone = processing(value_rows)
    return {
        "precommitted_read": precommitted_reads(value_rows),
        "torn_transaction": torn_transactions(value_rows),
        "double_processed": doubles,
        "unprocessed": undone,
    }


def g1c(a: Annotated, topics: list[str]) -> list[Cycle]:
    """The g1c components, from the write-read edges collected to the driver (one witness
    each: the least read by t/p/o, value, process, seq, as rules_txn.dependency_edges picks)."""
    if not a.on:
        return []
    reads = _value_rows(a).where(
        F.col("read") & F.col("rc") & F.col("txn").isNotNull() & F.col("vtxn").isNotNull()
        & (F.col("txn") != F.col("vtxn"))
    )
    edges = reads.groupBy("vtxn", "txn").agg(
        F.min(F.struct(*TPO, "value", "process", "seq")).alias("w")
    ).collect()
    return g1c_cycles({
        (row["vtxn"], row["txn"]): Witness(
            topics[row["w"]["topic"]], row["w"]["partition"], row["w"]["offset"],
            row["w"]["value"], row["w"]["process"], row["w"]["seq"],
        )
        for row in edges
    })
