"""`kafka-harness check` exactly as docs/history.md describes it, run as a user runs it.

The planted-anomaly contract and everything about starting (or not starting) Spark run the
program as a subprocess; the other verdicts run its entry point in this process
(conftest.check_here) on the pytest session's one Spark session, sparing a JVM start each."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pyarrow.parquet as pq

from harness.checker.result import ANOMALIES, SCHEMA_VERSION, STATS
from harness.history import COLUMN_NAMES, events_table

from .conftest import run_cli
from .histories import allowed_only, clean, zoo


def _counts(shape: dict) -> dict[str, int]:
    return {name: a["count"] for name, a in shape["anomalies"].items()}


def test_each_planted_anomaly_is_counted_exactly(tmp_path):
    b, expected = zoo()
    run = run_cli("check", str(b.write(tmp_path, split=True)), "--json", "--engine", "spark")
    assert run.code == 1, run.stderr
    shape = run.json()
    assert list(shape) == ["schema_version", "valid", "guarantee", "anomalies", "stats", "engine"]
    assert shape["engine"] == {"name": "spark", "asked": "spark", "rows": None,
                               "threshold": None}
    assert shape["schema_version"] == SCHEMA_VERSION == 1
    assert (shape["valid"], shape["guarantee"]) == (False, "at-least-once")
    assert list(shape["anomalies"]) == list(ANOMALIES)
    assert _counts(shape) == expected
    assert list(shape["stats"]) == list(STATS)
    assert shape["stats"]["rows"] == len(b.events)
    for anomaly in shape["anomalies"].values():
        assert set(anomaly) == {"count", "examples"}
        for example in anomaly["examples"]:
            assert example["rows"] and all(list(r) == list(COLUMN_NAMES) for r in example["rows"])
    lost = shape["anomalies"]["lost_write"]["examples"][0]
    assert (lost["topic"], lost["offset"], lost["value"]) == ("lost", 1, "lost-b")


def test_the_python_engine_gives_the_spark_engines_verdict_without_a_jvm(tmp_path):
    """``check --engine python``: the zoo's planted anomalies counted exactly as the Spark
    engine counts them (test_each_planted_anomaly_is_counted_exactly; the two engines are held
    equal by the property test in test_spark.py), a report too, and no JVM needed."""
    b, expected = zoo()
    history_dir = b.write(tmp_path, split=True)
    # With no Java to be found, Spark cannot start (test_spark_that_cannot_start_exits_3).
    python = run_cli("check", str(history_dir), "--json", "--engine", "python",
                     "--report", str(tmp_path / "report"), env={"JAVA_HOME": "/nonexistent"})
    assert python.code == 1, python.stderr
    assert _counts(python.json()) == expected
    assert python.json()["stats"]["rows"] == len(b.events)
    assert (tmp_path / "report" / "report.html").is_file()
    clean_dir = clean().write(tmp_path / "clean")
    assert run_cli("check", str(clean_dir), "--engine", "python").code == 0


def test_clean_history_is_valid(check_here, tmp_path):
    run = check_here(str(clean().write(tmp_path)), "--json")
    assert run.code == 0, run.stderr
    shape = run.json()
    assert shape["valid"] is True
    assert set(_counts(shape).values()) == {0}


def test_tolerated_anomalies_pass_at_least_once_and_report(check_here, tmp_path):
    b, expected = allowed_only()
    out = tmp_path / "report"
    run = check_here(str(b.write(tmp_path / "history")), "--json", "--report", str(out))
    assert run.code == 0, run.stderr
    shape = run.json()
    assert shape["valid"] is True and _counts(shape) == expected
    assert sorted(p.name for p in out.iterdir()) == ["junit.xml", "report.html", "report.json"]
    assert json.loads((out / "report.json").read_text()) == shape  # versioned alike
    cases = ET.parse(out / "junit.xml").getroot().iter("testcase")
    assert [c.get("name") for c in cases] == list(ANOMALIES)
    assert "<svg" in (out / "report.html").read_text()


def test_guarantee_decides_the_exit_code(check_here, tmp_path):
    b, _ = allowed_only()
    run = check_here(str(b.write(tmp_path)), "--guarantee", "exactly-once")
    assert run.code == 1, run.stderr
    assert "INVALID under exactly-once" in " ".join(run.stdout.split())
    for name in ("duplicate", "redelivery", "nonmonotonic_send"):
        assert name in run.stdout


def test_malformed_row_is_named_and_exits_2(check_here, tmp_path):
    b, _ = zoo()
    b.write(tmp_path, split=True)
    lines = (tmp_path / "b.jsonl").read_text().splitlines()
    lines[2] = (
        lines[2].replace('"type":"ok"', '"type":"okay"').replace('"type":"invoke"', '"type":"okay"')
    )
    (tmp_path / "b.jsonl").write_text("\n".join(lines) + "\n")
    run = check_here(str(tmp_path), "--json")
    assert run.code == 2
    assert run.json()["file"] == str(tmp_path / "b.jsonl") and run.json()["row"] == 3
    assert f"{tmp_path / 'b.jsonl'} row 3: unknown type 'okay'" in run.stderr


def test_bad_parquet_is_refused_before_spark_starts(tmp_path):
    pq.write_table(events_table(clean().events).drop_columns(["offset"]), tmp_path / "h.parquet")
    run = run_cli("check", str(tmp_path), "--json", env={"JAVA_HOME": "/nonexistent"})
    assert run.code == 2
    assert run.json() == {
        "schema_version": SCHEMA_VERSION,
        "error": f"{tmp_path / 'h.parquet'}: missing column 'offset'",
        "exit_code": 2,
        "file": str(tmp_path / "h.parquet"),
        "row": None,
    }


def test_usage_errors_exit_2(tmp_path):
    assert run_cli("check", str(tmp_path / "nowhere")).code == 2
    assert run_cli("check", str(tmp_path), "--guarantee", "maybe-once").code == 2
    assert run_cli("check").code == 2


def test_spark_that_cannot_start_exits_3(tmp_path):
    run = run_cli("check", str(clean().write(tmp_path)), "--json", "--engine", "spark",
                  env={"JAVA_HOME": "/nonexistent"})
    assert run.code == 3
    assert run.json()["exit_code"] == 3 and "cannot start Spark" in run.json()["error"]


def test_unreachable_master_exits_3(tmp_path):
    run = run_cli("check", str(clean().write(tmp_path)), "--master", "spark://127.0.0.1:9",
                  "--engine", "spark")
    assert run.code == 3
    assert "cannot reach Spark master spark://127.0.0.1:9" in run.stderr
