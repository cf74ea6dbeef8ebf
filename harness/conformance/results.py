"""A pytest plugin that writes each test's outcome, and the Kafka rule it checks, as JSON.

Loaded with ``-p harness.conformance.results`` and ``--suite-results FILE`` by the conformance
matrix (:mod:`harness.conformance.matrix`), which runs the suites once per target in a
subprocess and merges these files. JUnit XML would give outcomes too, but not the rule: every
suite test states the Kafka behaviour it checks in the first paragraph of its docstring, and a
failing peer is reported with it.

One record per test: ``nodeid``, ``outcome`` (passed / failed / skipped / error — error is a
failure outside the test body, e.g. the target would not start), ``reason`` (skip reason or the
first line of the failure), ``rule`` and ``duration_s``.

With ``--suite-progress FILE`` it also appends one JSON line ``{"nodeid", "outcome"}`` as each
test ends, so the process that started the session can show live counts
(:mod:`harness.conformance.progress`) without parsing pytest's terminal output.

Under pytest-xdist only the controller writes the files; the rule reaches it as the test's
``kafka_rule`` user property (which JUnit XML shows too), since the controller collects nothing.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

_REASON_CHARS = 300


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("kafka-harness").addoption(
        "--suite-results", default=None, metavar="FILE",
        help="write every test's outcome and rule as JSON to FILE (the conformance matrix)")
    parser.getgroup("kafka-harness").addoption(
        "--suite-progress", default=None, metavar="FILE",
        help="append one JSON line per test outcome to FILE as each test ends (live counts)")


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("--suite-results")
    # Under pytest-xdist the controller sees every worker's reports: only it writes the files.
    if path and not hasattr(config, "workerinput"):
        progress = config.getoption("--suite-progress")
        config.pluginmanager.register(
            SuiteResults(Path(path), Path(progress) if progress else None),
            "kafka-harness-suite-results")


RULE_PROPERTY = "kafka_rule"
"""The user property each test carries its rule in: reports carry user properties from an
xdist worker to the controller, which writes the files (JUnit XML lists it too)."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--suite-results"):
        return
    for item in items:
        function = getattr(item, "function", None)
        item.user_properties.append((RULE_PROPERTY, rule_of(getattr(function, "__doc__", None))))


def rule_of(docstring: str | None) -> str:
    """A suite test's rule: its docstring's first paragraph as one line. The rule is often
    wrapped ("... is refused with\n    UNKNOWN_MEMBER_ID [source]"), and its first line alone
    would quote it cut off before the answer it demands."""
    paragraph: list[str] = []
    for line in (docstring or "").strip().splitlines():
        if not line.strip():
            break
        paragraph.append(line.strip())
    return " ".join(paragraph)


def first_line(text: str | None) -> str:
    for line in (text or "").strip().splitlines():
        if line.strip():
            return line.strip()
    return ""


def _reason(report: pytest.TestReport) -> str:
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr or "")
    return first_line(text)[:_REASON_CHARS]


class SuiteResults:
    """Collects outcomes while the session runs and writes them when it ends."""

    def __init__(self, path: Path, progress: Path | None = None) -> None:
        self.path = path
        self.progress = progress
        self.tests: dict[str, dict[str, Any]] = {}
        self.rules: dict[str, str] = {}
        self.started = time.monotonic()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry = self.tests.setdefault(report.nodeid, {
            "nodeid": report.nodeid, "outcome": "passed", "reason": "", "duration_s": 0.0})
        entry["duration_s"] = round(entry["duration_s"] + report.duration, 3)
        for name, value in report.user_properties:
            if name == RULE_PROPERTY:
                self.rules[report.nodeid] = str(value)
        if entry["outcome"] not in ("failed", "error"):
            if report.failed:
                entry["outcome"] = "failed" if report.when == "call" else "error"
                entry["reason"] = _reason(report)
            elif report.skipped:
                entry["outcome"] = "skipped"
                entry["reason"] = _reason(report)
        if report.when == "teardown" and self.progress is not None:
            # Teardown is each test's last report: its outcome is final now.
            # One line per test, the file closed again, so a session killed half-way leaves
            # nothing open (the reader takes whole lines only).
            with self.progress.open("a") as progress:
                progress.write(json.dumps({"nodeid": report.nodeid,
                                           "outcome": entry["outcome"]}) + "\n")

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        tests = [{**entry, "rule": self.rules.get(nodeid, "")}
                 for nodeid, entry in self.tests.items()]
        payload = {"exit_status": int(exitstatus),
                   "wall_s": round(time.monotonic() - self.started, 1), "tests": tests}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(payload, indent=1))
