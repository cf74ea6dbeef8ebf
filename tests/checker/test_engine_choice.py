"""``--engine auto`` (the default): the Python engine up to PYTHON_MAX_ROWS rows, Spark above,
counted from the files' footers and lines; forced engines as asked; the engine that judged named
in ``--json``, report.json and the terminal report. No test here starts a JVM."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.checker import command, synth
from harness.checker.engine import PYTHON_MAX_ROWS, Choice, Engine, choose, count_rows
from harness.cli.check import check
from harness.cli.options import Engine as EngineOption
from harness.run.runner import RunOptions

from .histories import clean


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A synthesized Parquet history (a few thousand rows) and its row count."""
    directory = tmp_path_factory.mktemp("small")
    made = synth.generate(directory, synth.Spec(rows=2_000, partitions=2))
    return directory, made.rows


def test_rows_are_counted_from_parquet_footers_and_jsonl_lines(small, tmp_path):
    directory, rows = small
    assert count_rows(sorted(directory.glob("*.parquet"))) == rows
    history = clean().write(tmp_path, split=True)
    events = len(clean().events)
    files = [history / "a.parquet", history / "b.jsonl"]
    assert count_rows(files) == events
    jsonl = files[1]
    jsonl.write_text(jsonl.read_text().rstrip("\n"))  # no newline after the last row
    assert count_rows(files) == events


def test_auto_picks_python_up_to_the_threshold_and_spark_above(small):
    directory, rows = small
    assert rows <= PYTHON_MAX_ROWS
    assert choose(directory) == Choice(Engine.PYTHON, Engine.AUTO, rows, PYTHON_MAX_ROWS)
    assert choose(directory, "auto", threshold=rows).engine is Engine.PYTHON
    above = choose(directory, Engine.AUTO, threshold=rows - 1)
    assert above == Choice(Engine.SPARK, Engine.AUTO, rows, rows - 1)
    assert above.reason == f"auto: {rows:,} rows > {rows - 1:,}"
    assert choose(directory).summary == f"python (auto: {rows:,} rows ≤ {PYTHON_MAX_ROWS:,})"


def test_forced_engines_are_taken_as_asked_without_counting(tmp_path):
    nowhere = tmp_path / "nowhere"
    for engine in (Engine.SPARK, Engine.PYTHON):
        choice = choose(nowhere, engine.value)
        assert choice == Choice(engine, engine)
        assert choice.to_json() == {"name": engine.value, "asked": engine.value, "rows": None,
                                    "threshold": None}
        assert choice.summary == f"{engine} (--engine {engine})"


def test_auto_with_a_spark_master_named_is_spark_whatever_the_size(tmp_path):
    choice = choose(tmp_path / "nowhere", Engine.AUTO, master="spark://host:7077")
    assert choice.engine is Engine.SPARK and choice.rows is None
    assert choice.summary == "spark (auto: --master spark://host:7077)"
    assert choose(tmp_path / "nowhere", Engine.PYTHON, master="spark://host:7077").engine \
        is Engine.PYTHON


def test_a_history_that_cannot_be_counted_goes_to_python_which_names_the_fault(tmp_path):
    (tmp_path / "h.parquet").write_bytes(b"not parquet")
    assert choose(tmp_path) == Choice(Engine.PYTHON, Engine.AUTO, None, PYTHON_MAX_ROWS)
    assert choose(tmp_path / "nowhere").reason == "auto: the history's rows could not be counted"


def test_auto_is_the_default_of_check_and_run():
    assert [e.value for e in EngineOption] == [e.value for e in Engine]
    assert RunOptions().engine == Engine.AUTO
    assert inspect.signature(command.run).parameters["engine"].default is Engine.AUTO
    assert inspect.signature(check).parameters["engine"].default == Engine.AUTO


def test_the_terminal_report_and_report_json_name_the_engine(small, tmp_path, capfd):
    directory, rows = small
    code = command.run(directory, "at-least-once", report_dir=tmp_path / "report")
    out, _ = capfd.readouterr()
    assert code == 0
    said = " ".join(out.split())
    assert f"judged by python (auto: {rows:,} rows ≤ {PYTHON_MAX_ROWS:,})" in said
    written = json.loads((tmp_path / "report" / "report.json").read_text())
    assert written["engine"] == {"name": "python", "asked": "auto", "rows": rows,
                                 "threshold": PYTHON_MAX_ROWS}


def test_a_short_check_is_judged_by_python_without_loading_pyspark(small):
    """The whole program, as a user runs it: ``check --json`` of a small history answers from
    the Python engine, and pyspark is never imported (no Java is needed either)."""
    directory, rows = small
    env = {**os.environ, "JAVA_HOME": "/nonexistent"}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "harness.cli", "check", str(directory),
         "--json"], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    verdict = json.loads(done.stdout)
    assert verdict["engine"] == {"name": "python", "asked": "auto", "rows": rows,
                                 "threshold": PYTHON_MAX_ROWS}
    assert verdict["valid"] is True and verdict["stats"]["rows"] == rows
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:")]
    assert "harness.checker.python_engine" in imported  # the listing is what it claims
    assert not [name for name in imported if name.split(".")[0] in ("pyspark", "py4j")]
