"""Which engine judges a history, and the one place the Spark engine is loaded.

Two engines give the same verdicts (a property test holds them equal): the pure-Python rules
over a history read into memory (:mod:`harness.checker.python_engine`, small histories, no JVM)
and Spark jobs (:mod:`harness.checker.spark`, any size, any Spark master). pyspark and py4j take
a second to import and a JVM to run, so the Spark engine is imported here when a check first
uses it: never by ``kafka-harness --help``, the pytest plugin, or a run judged by the Python
engine. ``kafka-harness check`` and ``run`` both judge through :func:`judge`.

The default, ``auto``, has :func:`choose` pick by the history's row count (Parquet footers and
JSONL line counts, no data decoded, no pyspark): Python up to :data:`PYTHON_MAX_ROWS`, Spark
above, so a short run's verdict does not wait for a JVM and a big history never fills memory.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from harness import history
from harness.checker import python_engine
from harness.checker.cluster import SparkError
from harness.checker.result import MAX_EXAMPLES, CheckResult, ReportData

__all__ = ["PYTHON_MAX_ROWS", "Choice", "Engine", "Phase", "SparkError", "choose", "count_rows",
           "judge", "stdout_to_stderr"]

PYTHON_MAX_ROWS = 300_000
"""The most rows ``auto`` gives the Python engine; above it, Spark judges.

Measured on 2026-11-27 (docs/benchmarks.md, "Choosing the engine"): whole-process ``kafka-harness
check --json`` of synthesized histories on the 2-core machine, Python against Spark. Python took
0.04× Spark's time at 10k rows, 0.19× at 300k and 0.34× at 1M, but its memory grows with the
history (≈ 1.4 KB a row: 577 MiB at 300k, 1.5 GiB at 1M) while Spark's is bounded by its heap;
300k is where Python still answers at a fifth of Spark's time in under 600 MiB."""


class Engine(StrEnum):
    """What judges a history (``--engine``): ``auto`` is Python or Spark by the row count."""

    AUTO = "auto"
    SPARK = "spark"
    PYTHON = "python"


@dataclass(frozen=True)
class Choice:
    """The engine that judges a history, and why: asked for, or ``auto`` by the row count."""

    engine: Engine  # SPARK or PYTHON, never AUTO
    asked: Engine
    rows: int | None = None  # counted only for auto
    threshold: int | None = None
    master: str | None = None  # auto with a Spark master named: Spark, uncounted

    @property
    def reason(self) -> str:
        if self.asked is not Engine.AUTO:
            return f"--engine {self.asked}"
        if self.master is not None:
            return f"auto: --master {self.master}"
        if self.rows is None:
            return "auto: the history's rows could not be counted"
        side = "≤" if self.engine is Engine.PYTHON else ">"
        return f"auto: {self.rows:,} rows {side} {self.threshold:,}"

    @property
    def summary(self) -> str:
        """E.g. ``python (auto: 9,304 rows ≤ 300,000)``, for the terminal."""
        return f"{self.engine} ({self.reason})"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.engine.value, "asked": self.asked.value, "rows": self.rows,
                "threshold": self.threshold}


def count_rows(files: list[Path]) -> int:
    """The rows of a history's files without decoding them: a Parquet file's footer, a JSONL
    file's lines (blank ones too: near enough to choose an engine)."""
    rows = 0
    for path in files:
        if path.suffix == ".parquet":
            rows += pq.ParquetFile(path).metadata.num_rows
            continue
        with path.open("rb") as handle:
            last = b"\n"
            while chunk := handle.read(1 << 20):
                rows += chunk.count(b"\n")
                last = chunk[-1:]
            rows += last != b"\n"
    return rows


def choose(history_dir: Path, engine: Engine | str = Engine.AUTO, *,
           threshold: int = PYTHON_MAX_ROWS, master: str | None = None) -> Choice:
    """The engine that judges the history in ``history_dir``: the one asked for, or for
    ``auto`` Python up to ``threshold`` rows and Spark above — and Spark whatever the size when
    a Spark ``master`` is named (``--master``: the user asked for that cluster). Never fails: a
    history that cannot be counted goes to the Python engine, which names what is wrong without
    starting a JVM."""
    asked = Engine(engine)
    if asked is not Engine.AUTO:
        return Choice(asked, asked)
    if master:
        return Choice(Engine.SPARK, asked, master=master)
    try:
        rows = count_rows(history.history_files(history_dir))
    except (history.HistoryError, OSError, pa.ArrowException):
        return Choice(Engine.PYTHON, asked, None, threshold)
    return Choice(Engine.PYTHON if rows <= threshold else Engine.SPARK, asked, rows, threshold)


class Phase(StrEnum):
    """A step of a Spark check that takes long enough to be shown."""

    STARTING = "starting Spark"
    CHECKING = "checking the history"
    REPORTING = "gathering the report's data"


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr meanwhile: a JVM started now keeps it so, and its
    chatter cannot spoil a ``--json`` stdout (``check --json``, ``run --json``)."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _quiet(_phase: Phase) -> AbstractContextManager[object]:
    return nullcontext()


def judge(history_dir: Path, guarantee: str, engine: Engine | str, *,
          master: str | None = None, history_bytes: int | None = None, report: bool = True,
          progress: Callable[[Phase], AbstractContextManager[object]] = _quiet,
          max_examples: int = MAX_EXAMPLES) -> tuple[CheckResult, ReportData | None]:
    """The verdict on the history in ``history_dir`` and, with ``report``, what its report
    shows (the Python engine always gathers it: it costs nothing more there). ``auto`` judges
    with :func:`choose`'s engine; callers that name it call :func:`choose` first.

    ``history_bytes`` tunes Spark for the history's size; ``progress`` wraps each slow step of
    a Spark check (a status line); ``max_examples`` bounds each anomaly's examples. Raises
    :class:`~harness.history.HistoryError` for a bad history and :class:`SparkError` when
    Spark cannot start or a job fails."""
    if Engine(engine) is Engine.AUTO:
        engine = choose(history_dir, master=master).engine
    if Engine(engine) is Engine.PYTHON:
        return python_engine.check(history_dir, guarantee, max_examples=max_examples)
    # The Spark engine: pyspark, py4j and a JVM, only now that a check needs them.
    from harness.checker import spark, spark_session

    with progress(Phase.STARTING):
        session = spark_session.shared_session(master, history_bytes)
    with progress(Phase.CHECKING):
        result = spark.check(session, history_dir, guarantee, max_examples=max_examples)
    if not report:
        return result, None
    with progress(Phase.REPORTING):
        return result, spark.report_data(session, history_dir, result)
