"""The Spark checker against the pure-Python reference, on one shared local session."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark import SparkContext
from pyspark.sql.types import StringType, StructField, StructType

from harness import history
from harness.checker import rules, spark_jvm, spark_session, sql, synth
from harness.checker import spark as engine
from harness.checker.result import GUARANTEES
from harness.history import Event, HistoryError, read_history, write_jsonl, write_parquet

from .histories import RC, Builder, side_by_side, zoo


@st.composite
def histories(draw: st.DrawFn) -> Builder:
    """Few processes, partitions and offsets, so that collisions, and anomalies, are common."""
    b = Builder()
    values = ["phantom-1", "phantom-2"]
    for i in range(draw(st.integers(1, 24))):
        kind = draw(st.sampled_from(["send", "send", "poll", "poll", "commit", "assign", "revoke"]))
        partition = draw(st.integers(0, 1))
        if kind == "send":
            outcome = draw(st.sampled_from(["ok", "ok", "ok", "fail", "info", None]))
            offset = draw(st.none() | st.integers(0, 5))
            b.send(draw(st.integers(1, 2)), f"v{i}", offset, partition=partition, outcome=outcome)
            values.append(f"v{i}")
        elif kind == "poll":
            records = draw(
                st.lists(st.tuples(st.integers(0, 5), st.sampled_from(values)), max_size=4)
            )
            b.poll(
                draw(st.integers(3, 5)),
                records,
                partition=partition,
                group=draw(st.sampled_from([None, "g", "g"])),
                generation=draw(st.integers(-1, 1)),
                group_protocol=draw(st.sampled_from([None, "classic", "consumer", "consumer"])),
            )
        elif kind == "commit":
            b.commit(
                draw(st.integers(3, 5)),
                draw(st.integers(0, 6)),
                partition=partition,
                group=draw(st.sampled_from([None, "g", "h"])),
                outcome=draw(st.sampled_from(["ok", "ok", "fail"])),
                time_ns=draw(st.integers(0, 30)) * 1000,
            )
        else:
            lost = kind == "revoke" and draw(st.booleans())
            b.assignment(
                kind, draw(st.integers(3, 5)), partition=partition, type_="info" if lost else "ok"
            )
    return b


@st.composite
def transactional_histories(draw: st.DrawFn) -> Builder:
    """Dense in what the transaction rules judge: sends get the offsets a broker would give
    (so torn and unprocessed inputs sit below read ones), polls read what was sent (or what a
    transaction not yet finished will send), consume-transform-produce steps derive outputs of
    a group from inputs it read, and two transactions may be open at once, each reading the
    other's values (g1c). Assignments, revokes and commits outside transactions come too, so
    that runs ended by a failed transaction meet runs ended by them. Kept apart from histories()
    (no transaction): a transactional history costs the Spark engine a minute, not seconds."""
    b = Builder()
    sent: list[tuple[int, int, str]] = []  # (partition, offset, value)
    ahead = {0: 0, 1: 0}
    inputs: list[tuple[str, str]] = []  # (group, value) a poll of the group read
    steps = draw(st.integers(1, 10))
    future = [f"t{i}.{j}.{k}" for i in range(steps) for j in range(2) for k in range(2)]
    others: list[str] = []  # the values of the other transaction open, sent or not

    def send(process: int, value: str, txn: int | None) -> None:
        partition = draw(st.integers(0, 1))
        outcome = draw(st.sampled_from(["ok", "ok", "ok", "ok", "fail", "info", None]))
        offset = ahead[partition]
        ahead[partition] += 1 if outcome == "ok" or draw(st.booleans()) else 0
        group, derived = draw(st.sampled_from([(None, None), *inputs]))
        b.send(process, value, offset, partition=partition, outcome=outcome, txn=txn,
               group=group, derived_from=derived)
        sent.append((partition, offset, value))

    def poll(process: int, txn: int | None) -> None:
        partition = draw(st.integers(0, 1))
        here = sorted((o, v) for p, o, v in sent if p == partition)
        unsent = draw(st.lists(st.sampled_from(others if others and txn else future),
                               max_size=2))
        here += [(ahead[partition] + k, v) for k, v in enumerate(unsent)]
        chosen = draw(st.lists(st.sampled_from(here), max_size=4)) if here else []
        group = draw(st.sampled_from([None, "g", "g", "h"]))
        b.poll(process, sorted(chosen) if draw(st.booleans()) else chosen, partition=partition,
               group=group, generation=1, txn=txn,
               isolation=draw(st.sampled_from([None, RC, RC, "read_uncommitted"])))
        inputs.extend((group, v) for _, v in chosen if group is not None)

    for i in range(steps):
        kind = draw(st.sampled_from(["send", "poll", "poll", "txn", "txn", "txn", "other"]))
        if kind == "send":
            send(draw(st.integers(1, 2)), f"v{i}", None)
        elif kind == "poll":
            poll(draw(st.integers(1, 5)), None)
        elif kind == "other":
            process, partition = draw(st.integers(1, 5)), draw(st.integers(0, 1))
            f = draw(st.sampled_from(["assign", "revoke", "commit"]))
            if f == "commit":
                b.commit(process, draw(st.integers(0, 4)), partition=partition,
                         group=draw(st.sampled_from(["g", "h"])))
            else:
                b.assignment(f, process, partition=partition,
                             type_="info" if draw(st.booleans()) else "ok")
        else:
            open_ = [(p, b.begin(p)) for p in draw(st.sets(st.integers(1, 4), min_size=1,
                                                            max_size=2))]
            made = {txn: 0 for _, txn in open_}
            for _ in range(draw(st.integers(0, 6))):
                j, (process, txn) = draw(st.sampled_from(list(enumerate(open_))))
                others[:] = [f"t{i}.{1 - j}.{k}" for k in range(2)] if len(open_) > 1 else []
                step = draw(st.sampled_from(["send", "send", "poll", "poll", "commit"]))
                if step == "send" and made[txn] < 2:
                    send(process, f"t{i}.{j}.{made[txn]}", txn)
                    made[txn] += 1
                elif step == "poll":
                    poll(process, txn)
                elif step == "commit":
                    b.commit(process, draw(st.integers(0, 4)), partition=draw(st.integers(0, 1)),
                             group=draw(st.sampled_from(["g", "h"])), txn=txn)
            others.clear()
            for process, txn in open_:
                outcome = draw(st.sampled_from(["ok", "ok", "fail", "info", None]))
                if outcome is not None:
                    b.end(process, txn, outcome)
    return b


EVERY = 1_000_000  # max_examples: every instance of every anomaly is reported and compared


def _agree(spark, directory, guarantee: str) -> None:
    """Both ways the Spark engine judges the by-topic-partition rules (the compiled passes, as
    a classic session does, and the SQL rules, as Spark Connect does) agree with the reference."""
    expected = rules.check_events(read_history(directory), guarantee, max_examples=EVERY)
    for passes in (True, False):
        got = engine.check(spark, directory, guarantee, max_examples=EVERY, passes=passes)
        assert got.to_json() == expected.to_json(), f"passes={passes}"


@pytest.mark.slow  # a transactional check costs about 25 s on Spark (docs/benchmarks.md)
@pytest.mark.timeout(1800)
@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(bs=st.lists(transactional_histories(), min_size=2, max_size=4),
       guarantee=st.sampled_from(sorted(GUARANTEES)))
def test_spark_agrees_with_the_reference_on_transactions(spark, tmp_path_factory, bs, guarantee):
    directory = side_by_side(bs).write(tmp_path_factory.mktemp("history"))
    _agree(spark, directory, guarantee)


@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    bs=st.lists(histories(), min_size=4, max_size=8),
    split=st.sampled_from([False, False, True]),
    guarantee=st.sampled_from(sorted(GUARANTEES)),
)
def test_spark_agrees_with_the_reference(spark, tmp_path_factory, bs, split, guarantee):
    """4 checks of 4 to 8 histories side by side (16 or more histories; it was 10 checks of
    one, 209 s of a CI run on a loaded machine)."""
    directory = side_by_side(bs).write(tmp_path_factory.mktemp("history"), split=split)
    _agree(spark, directory, guarantee)


@pytest.mark.parametrize("passes", [True, False], ids=["jvm-passes", "sql-rules"])
def test_zoo_examples_and_context_agree(spark, tmp_path, passes):
    b, expected = zoo()
    b.write(tmp_path, split=True)
    result = engine.check(spark, tmp_path, passes=passes).to_json()
    assert {k: a["count"] for k, a in result["anomalies"].items()} == expected
    assert result == rules.check_events(b.events).to_json()


def test_a_classic_session_judges_with_the_compiled_passes(spark):
    """The session the checker starts has the passes' jar (built from harness/checker/jvm),
    so a check on it does not fall back to the SQL rules."""
    assert spark_session.passes_missing is None
    assert spark_jvm.available(spark)


# A fresh process: a JVM's class path is fixed when it starts, and this one's must not be.
_SQL_FALLBACK = """
import json, sys
from harness.checker import spark, spark_jvm, spark_session
session = spark_session.start_session(history_bytes=0)
try:
    result = spark.check(session, sys.argv[1]).to_json()
    print(json.dumps({"missing": spark_session.passes_missing,
                      "available": spark_jvm.available(session), "result": result}))
finally:
    session.stop()
"""


def test_a_session_without_the_passes_says_why_and_judges_with_the_sql_rules(tmp_path):
    """A --driver-class-path in PYSPARK_SUBMIT_ARGS replaces the class path the checker asks
    for: the session has no passes, says so in passes_missing, and judges as the pure rules."""
    b, _ = zoo()
    b.write(tmp_path / "history")
    env = {**os.environ,
           "PYSPARK_SUBMIT_ARGS": f"--driver-class-path {tmp_path / 'elsewhere'} pyspark-shell"}
    done = subprocess.run([sys.executable, "-c", _SQL_FALLBACK, str(tmp_path / "history")],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert not found["available"]
    assert "class path" in found["missing"]
    assert found["result"] == rules.check_events(b.events).to_json()


def test_synthetic_history_counts(spark, tmp_path):
    rates = {name: 0.001 for name in synth.PLANTED}
    made = synth.generate(tmp_path, synth.Spec(rows=30_000, partitions=2, rates=rates, unseen=0.01))
    result = engine.check(spark, tmp_path)
    assert {k: a.count for k, a in result.anomalies.items()} == made.expected


def _bad_rows(tmp_path, kind: str) -> None:
    """Histories that are wrong in one way, each in a place only Spark's positions can name."""
    good = [Event("r", 1, i, i, i, "invoke", "send", "t", value=f"v{i}") for i in range(40)]
    if kind == "unknown type in parquet":
        good[17] = Event("r", 1, 17, 17, 17, "okay", "send", "t", value="v17")
        write_parquet(tmp_path / "a.parquet", good)
    elif kind == "completion without invoke in jsonl":
        write_parquet(tmp_path / "a.parquet", good)
        write_jsonl(
            tmp_path / "b.jsonl", [Event("r", 2, 0, 99, 1, "ok", "send", "t", 0, 0, value="x")]
        )
    elif kind == "reused seq":
        good[30] = Event("r", 1, 3, 30, 30, "invoke", "send", "t", value="v30")
        write_parquet(tmp_path / "a.parquet", good)
    elif kind == "reused value":
        good[25] = Event("r", 1, 25, 25, 25, "invoke", "send", "t", value="v4")
        write_parquet(tmp_path / "a.parquet", good)
    else:  # a bad line deep in a JSONL file that Spark reads in many splits
        lines = [json.dumps(e.as_dict()) for e in good * 60]
        lines = [
            json.dumps({**json.loads(line), "seq": n, "op": n}) for n, line in enumerate(lines)
        ]
        lines[2000] = lines[2000].replace('"process": 1', '"process": "1"')
        (tmp_path / "z.jsonl").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    "kind",
    [
        "unknown type in parquet",
        "completion without invoke in jsonl",
        "reused seq",
        "reused value",
        "wrong type deep in split jsonl",
    ],
)
@pytest.mark.parametrize("passes", [True, False], ids=["jvm-passes", "sql-rules"])
def test_malformed_history_named_as_the_reference_names_it(spark, tmp_path, kind, passes):
    _bad_rows(tmp_path, kind)
    with pytest.raises(HistoryError) as reference:
        read_history(tmp_path)
    spark.conf.set("spark.sql.files.maxPartitionBytes", "16384")
    try:
        with pytest.raises(HistoryError) as found:
            engine.check(spark, tmp_path, passes=passes)
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert str(found.value) == str(reference.value)


@st.composite
def operations(draw: st.DrawFn) -> list[Event]:
    """Rows of a few operations, each of one f but now and then a row of another, of any
    type, so that every way an operation can be malformed (history.op_problem) and a
    process's seq reused come up; every row has a topic, partition, offset and value, so no
    row alone is malformed."""
    fs = draw(st.lists(st.sampled_from(history.FUNCTIONS), min_size=4, max_size=4))
    rows = []
    seqs = {1: 0, 2: 0}
    for _ in range(draw(st.integers(1, 12))):
        process, op = draw(st.sampled_from([1, 2])), draw(st.integers(0, 3))
        seq = seqs[process] if draw(st.integers(0, 5)) else max(0, seqs[process] - 1)
        seqs[process] = seq + 1
        f = fs[op] if draw(st.integers(0, 9)) else draw(st.sampled_from(history.FUNCTIONS))
        rows.append(Event(
            "r", process, seq, op, len(rows), draw(st.sampled_from(history.TYPES)), f, "t", 0,
            len(rows), value=draw(st.sampled_from(["a", "b", "c"])),
        ))
    return rows


@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rows=operations())
def test_malformed_operations_named_as_the_reader_names_them(spark, tmp_path_factory, rows):
    """The operations' and seqs' problems, which the compiled passes find on a classic session
    and the SQL rules on Spark Connect, named in the reader's words at its row (or none)."""
    directory = tmp_path_factory.mktemp("history")
    write_parquet(directory / "a.parquet", rows)
    try:
        read_history(directory)
        expected = None
    except HistoryError as exc:
        expected = str(exc)
    for passes in (True, False):
        try:
            engine.check(spark, directory, passes=passes)
            found = None
        except HistoryError as exc:
            found = str(exc)
        assert found == expected, f"passes={passes}"


def test_one_session_serves_every_check_in_the_process(spark, check_here, tmp_path):
    """The CLI's entry point and the runner's checker reuse the process's session and leave
    it running for the next check (it stops at exit), rather than paying a JVM start each."""
    b, _ = zoo()
    run = check_here(str(b.write(tmp_path)), "--json")
    assert run.code == 1, run.stderr
    assert spark_session.shared_session("local[2]") is spark
    assert spark_session.shared_session("local[*]") is spark  # the runner's default master
    assert spark.range(3).count() == 3


_VALUES = {
    "string": st.sampled_from(["t", "v", "g"]),
    "int64": st.integers(-2, 3),
    "int32": st.integers(-2, 3),
}


def _cell(kind: str, null_one_in: int) -> st.SearchStrategy:
    return st.integers(1, null_one_in).flatmap(lambda n: st.none() if n == 1 else _VALUES[kind])


@st.composite
def _rows(draw: st.DrawFn) -> dict:
    """Rows near the edge of validity: a required column now and then null, optional ones
    often, f and type known or not, positions negative or not."""
    row = {c.name: draw(_cell(c.kind, 12 if c.required else 3)) for c in history.EVENT_COLUMNS}
    for name, known in (
        ("f", history.FUNCTIONS),
        ("type", history.TYPES),
        ("group_protocol", history.GROUP_PROTOCOLS),
    ):
        allowed = st.sampled_from([*known, "odd"])
        row[name] = draw(
            st.integers(1, 12).flatmap(lambda n, a=allowed: st.none() if n == 1 else a)
        )
    return row


@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=st.lists(_rows(), min_size=1, max_size=300))
def test_bad_rows_are_counted_exactly_as_the_reader_finds_them(spark, rows):
    """The stats' bad-row count (sql.row_is_bad, no message built) flags just the rows whose
    problem the reader names, and sql.row_problem names it in the reader's words."""
    schema = StructType([*engine.SCHEMA.fields, StructField("_problem", StringType())])
    frame = spark.createDataFrame([{**r, "_problem": None} for r in rows], schema)
    found = frame.selectExpr(
        f"{sql.row_is_bad()} AS bad", f"{sql.row_problem()} AS problem"
    ).collect()
    expected = [history.row_problem(r) for r in rows]
    assert [r["problem"] for r in found] == expected
    assert [r["bad"] for r in found] == [p is not None for p in expected]


def test_a_session_whose_jvm_died_is_replaced_and_judges_the_next_history(spark, tmp_path):
    """A long-lived process (a pytest session, a `run` of many checks) outlives its JVM: were
    the driver to die (killed, or a fatal error in a task, which exits a local driver), the
    next check gets a new session instead of a gateway nobody answers. Last in this file: it
    replaces the session every test after it shares."""
    b, expected = zoo()
    history = b.write(tmp_path)
    jvm = SparkContext._gateway.proc
    os.kill(jvm.pid, signal.SIGKILL)
    jvm.wait(timeout=60)
    fresh = spark_session.shared_session("local[2]", history_bytes=0)
    assert fresh is not spark
    found = engine.check(fresh, history).to_json()
    assert {k: a["count"] for k, a in found["anomalies"].items()} == expected
    assert spark_session.shared_session("local[*]") is fresh
