"""Which engine judges a history, and the one place the Spark engine is loaded.

Two engines give the same verdicts (a property test holds them equal): the pure-Python rules
over a history read into memory (:mod:`harness.checker.python_engine`, small histories, no JVM)
and Spark jobs (:mod:`harness.checker.spark`, any size, any Spark master). pyspark and py4j take
a second to import and a JVM to run, so the Spark engine is imported here when a check first
uses it: never by ``kafka-harness --help``, the pytest plugin, or a run judged by the Python
engine. ``kafka-harness check`` and ``run`` both judge through :func:`judge`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from enum import StrEnum
from pathlib import Path

from harness.checker import python_engine
from harness.checker.cluster import SparkError
from harness.checker.result import CheckResult, ReportData

__all__ = ["Engine", "Phase", "SparkError", "judge", "stdout_to_stderr"]


class Engine(StrEnum):
    """What judges a history (``--engine``)."""

    SPARK = "spark"
    PYTHON = "python"


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
          ) -> tuple[CheckResult, ReportData | None]:
    """The verdict on the history in ``history_dir`` and, with ``report``, what its report
    shows (the Python engine always gathers it: it costs nothing more there).

    ``history_bytes`` tunes Spark for the history's size; ``progress`` wraps each slow step of
    a Spark check (a status line). Raises :class:`~harness.history.HistoryError` for a bad
    history and :class:`SparkError` when Spark cannot start or a job fails."""
    if Engine(engine) is Engine.PYTHON:
        return python_engine.check(history_dir, guarantee)
    # The Spark engine: pyspark, py4j and a JVM, only now that a check needs them.
    from harness.checker import spark, spark_session

    with progress(Phase.STARTING):
        session = spark_session.shared_session(master, history_bytes)
    with progress(Phase.CHECKING):
        result = spark.check(session, history_dir, guarantee)
    if not report:
        return result, None
    with progress(Phase.REPORTING):
        return result, spark.report_data(session, history_dir, result)
