"""`kafka-harness check`: a history in; a verdict, reports and an exit code out.

The exit codes are the contract CI relies on (docs/history.md): 0 valid, 1 an anomaly the
guarantee forbids, 2 a usage error or malformed history, 3 Spark or Java could not start (or a
Spark job failed). With --json, stdout carries exactly one JSON object whatever happens, so the
JVM's own output is pointed at stderr before it starts.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

from rich.console import Console

from harness import history
from harness.checker import manifest, report
from harness.checker.engine import (
    Choice,
    Engine,
    Phase,
    SparkError,
    choose,
    judge,
    stdout_to_stderr,
)
from harness.checker.result import SCHEMA_VERSION, CheckResult

VALID, INVALID, USAGE, INFRASTRUCTURE = 0, 1, 2, 3


def _refuse(code: int, message: str, as_json: bool, where: history.Location | None = None) -> int:
    Console(stderr=True).print(f"[red]error:[/] {message}", highlight=False, soft_wrap=True)
    if as_json:
        fields = {"file": where.file, "row": where.row} if where else {}
        print(json.dumps({"schema_version": SCHEMA_VERSION, "error": message, "exit_code": code,
                          **fields}))
    return code


def run(
    history_dir: Path,
    guarantee: str,
    *,
    master: str | None = None,
    as_json: bool = False,
    report_dir: Path | None = None,
    engine: Engine | str = Engine.AUTO,
) -> int:
    """Check one history and report; returns the process exit code."""
    try:
        files = history.history_files(history_dir)
        for path in files:  # cheap footer checks: refuse a bad file before starting a JVM
            if path.suffix == ".parquet":
                history.check_parquet_schema(path)
    except history.HistoryError as exc:
        return _refuse(USAGE, str(exc), as_json, exc.location)
    size = sum(p.stat().st_size for p in files)
    choice = choose(history_dir, engine, master=master)
    with stdout_to_stderr() if as_json else nullcontext():
        outcome = _check(history_dir, len(files), size, guarantee, master, report_dir, choice)
    if isinstance(outcome, tuple):
        code, message, where = outcome
        return _refuse(code, message, as_json, where)
    if as_json:
        print(json.dumps({**outcome.to_json(), "engine": choice.to_json()}))
    else:
        report.print_summary(Console(), outcome, str(history_dir), judged_by=choice.summary)
    return VALID if outcome.valid else INVALID


def _check(history_dir: Path, files: int, size: int, guarantee: str, master: str | None,
           report_dir: Path | None, choice: Choice
           ) -> CheckResult | tuple[int, str, history.Location | None]:
    """The verdict (its reports written), or why there is none (exit code, message, where)."""
    err = Console(stderr=True)
    said = {Phase.STARTING: f"Starting Spark ({choice.reason})…",
            Phase.CHECKING: f"Checking {files} history file(s) in {history_dir}…",
            Phase.REPORTING: f"Writing the report to {report_dir}…"}
    try:
        result, data = judge(history_dir, guarantee, choice.engine, master=master,
                             history_bytes=size, report=report_dir is not None,
                             progress=lambda phase: err.status(said[phase]))
    except history.HistoryError as exc:
        return USAGE, str(exc), exc.location
    except SparkError as exc:
        return INFRASTRUCTURE, str(exc), None
    if report_dir is not None:
        assert data is not None  # judge gathers it when asked for a report
        written = report.write_reports(report_dir, result, data, str(history_dir),
                                       manifest.read(history_dir), choice.to_json())
        err.print("report: " + ", ".join(str(p) for p in written), highlight=False)
    return result
