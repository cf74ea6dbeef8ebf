"""The conformance matrix: the suites run against several targets, one table of the outcomes.

Each target gets its own pytest session in a subprocess (``pytest <suites>/... --kafka-target
T``), so a target that hangs or crashes cannot take the others down, and each session starts and
stops its own broker. The suites are found by :func:`harness.conformance.suites.suites_dir` (the
checkout's ``suites/`` or the installed package), so the matrix runs from any directory. The
sessions write their outcomes with :mod:`harness.conformance.results`; this module merges them into
``matrix.json``, ``matrix.md`` and ``matrix.html``: pass / fail / skip (with the reason) per
test per target, and for every failure the Kafka rule the test checks (the first paragraph of its
docstring) next to what the target did. While a session runs, its live counts are shown
(:mod:`harness.conformance.progress`).

JSON: ``matrix.json`` is ``{"schema_version": 1, "targets": [...]}``, one object per target
(``target``, ``exit_status``, ``wall_s``, ``tests``, ``log``, ``junit``; each test as
:mod:`harness.conformance.results` writes it), and ``kafka-harness matrix --json`` prints
``{"schema_version": 1, "exit_code", "files", "targets": {target: {outcome: count}}}``, or
``{"schema_version": 1, "error", "exit_code"}`` when the matrix could not be run. The
version is the harness's one :data:`harness.schema.SCHEMA_VERSION`.

Exit code: 1 when a test fails on a *gating* target, 3 when a target produced no results at all
(it could not be run). The targets a user names (``--targets``, ``--bootstrap-server``) gate: a
user gating their own broker's pull requests gets a failing job when it fails a test. With no
target named, the defaults run and the project's own yardsticks gate — the reference broker,
which must conform, and Apache Kafka, on which a failing test is a wrong test — while the peers'
failures are findings shown in the table.
"""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.cluster.options import DOCKER_KINDS, Backend
from harness.conformance import suites as suite_location
from harness.conformance.progress import ProgressFile, SuiteProgress, for_stderr
from harness.conformance.suites import PACKAGE, suites_dir
from harness.errors import ExitCode, HarnessError, UsageError
from harness.lifecycle import reaper
from harness.schema import SCHEMA_VERSION
from harness.waiting import ClusterWaitTimeout, wait_for

SUITES = suite_location.SUITES
DEFAULT_TARGETS = ("reference", "apache-kafka", "apache-kafka-kraft", "tansu", "kfake",
                   "librdkafka-mock")
# What gates when the user named no target (see the module docstring).
DEFAULT_GATING = frozenset({"reference", "apache-kafka", "apache-kafka-kraft"})
OUTCOMES = ("passed", "failed", "error", "skipped")
_TARGET_TIMEOUT_S = 1800


class MatrixError(UsageError, ValueError):
    """The matrix cannot be run as asked (a usage error: exit 2)."""


@dataclass
class TargetRun:
    target: str
    exit_status: int
    wall_s: float
    tests: list[dict[str, Any]] = field(default_factory=list)
    log: str = ""
    junit: str = ""

    def counts(self, suite: str | None = None) -> Counter[str]:
        return Counter(t["outcome"] for t in self.tests
                       if suite is None or suite_of(t["nodeid"]) == suite)

    @property
    def ran(self) -> bool:
        return bool(self.tests)


# What the suites directory is called in a node id: ``suites/`` in a checkout, the package's
# name when they are installed.
_SUITES_DIR_NAMES = ("suites", PACKAGE)


def short_nodeid(nodeid: str) -> str:
    """``suites/protocol/test_x.py::a`` → ``protocol/test_x.py::a``, wherever the suites are."""
    first, _, rest = nodeid.partition("/")
    return rest if first in _SUITES_DIR_NAMES and rest else nodeid


def suite_of(nodeid: str) -> str:
    return short_nodeid(nodeid).split("/")[0]


def parse_list(text: str, allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
    """``"a,b"`` → ("a", "b"); MatrixError naming unknown names and the allowed ones."""
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        raise MatrixError(f"unknown {what} {', '.join(unknown) or '(none given)'}; "
                          f"allowed: {', '.join(allowed)}")
    return names


def pytest_command(target: str, suites: tuple[str, ...], results: Path, junit: Path, *,
                   bootstrap: str | None = None, keyword: str | None = None,
                   markers: str = "not slow", backend: Backend = Backend.LOCAL,
                   where: Path | None = None, progress: Path | None = None,
                   recipe: Path | None = None) -> list[str]:
    """The pytest invocation of one target's session: the suite directories under ``where``
    (default :func:`suites_dir`) as paths, run from its parent, whose name starts every node
    id. The plugin's options are spelt as it names them now (``--kafka-…``); the old names warn,
    and the project's pytest configuration turns warnings into errors."""
    where = (where or suites_dir()).resolve()
    command = [sys.executable, "-m", "pytest", *(str(where / s) for s in suites),
               "--rootdir", str(where.parent), "--kafka-target", target,
               "-p", "harness.conformance.results", "--suite-results", str(results),
               "--junitxml", str(junit), "-m", markers, "-q", "-p", "no:cacheprovider"]
    if progress is not None:
        command += ["--suite-progress", str(progress)]
    if bootstrap:
        command += ["--kafka-bootstrap-server", bootstrap]
    if recipe is not None:
        command += ["--kafka-recipe", str(recipe.resolve())]
    if keyword:
        command += ["-k", keyword]
    if backend != Backend.LOCAL:
        command += ["--kafka-backend", backend]
    return command


def run_target(target: str, suites: tuple[str, ...], out_dir: Path, *,
               bootstrap: str | None = None, keyword: str | None = None,
               markers: str = "not slow", where: Path | None = None,
               backend: Backend = Backend.LOCAL, progress: SuiteProgress | None = None,
               recipe: Path | None = None) -> TargetRun:
    """One pytest session of `suites` (directories under ``where``, default
    :func:`suites_dir`) against `target`, its live counts shown through ``progress``."""
    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    results, junit, log, counts = (out_dir / f"{target}.{ext}"
                                   for ext in ("json", "xml", "log", "progress"))
    results.unlink(missing_ok=True)
    counts.unlink(missing_ok=True)
    where = (where or suites_dir()).resolve()
    command = pytest_command(target, suites, results, junit, bootstrap=bootstrap,
                             keyword=keyword, markers=markers, backend=backend, where=where,
                             progress=counts, recipe=recipe)
    started = time.monotonic()
    if progress is not None:
        progress.started(target, log)
    try:
        status = _run_session(command, where.parent, log, ProgressFile(counts), target, progress)
    finally:
        if progress is not None:
            progress.finished(target)
    run = TargetRun(target, status, round(time.monotonic() - started, 1),
                    log=str(log), junit=str(junit))
    if results.exists():
        run.tests = json.loads(results.read_text())["tests"]
    return run


_CTRL_C_GRACE_S = 5
_INTERRUPT_GRACE_S = 60


def _run_session(command: list[str], cwd: Path, log: Path, counts: ProgressFile, target: str,
                 progress: SuiteProgress | None) -> int:
    """Run one session, its output in ``log``; its exit status, -1 when it timed out."""
    with log.open("w") as output:
        # Should this process die without stopping it, the watchdog kills the session, whose
        # own watchdog then removes its target.
        process, entry = reaper.spawn(command, cwd=cwd, stdout=output,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                      start_new_session=False)
    try:
        return _supervise_session(process, counts, target, progress)
    finally:
        reaper.release(entry)


def _supervise_session(process: subprocess.Popen[bytes], counts: ProgressFile, target: str,
                       progress: SuiteProgress | None) -> int:

    def ended() -> bool:
        if counts.read_new() and progress is not None:
            progress.update(target, counts.counts)
        return process.poll() is not None

    try:
        wait_for(ended, _TARGET_TIMEOUT_S, f"the {target} session to end", interval=0.5)
    except ClusterWaitTimeout:
        process.kill()
        process.wait()
        return -1
    except KeyboardInterrupt:
        _stop_session(process)
        raise
    return process.returncode


def _stop_session(process: subprocess.Popen[bytes]) -> None:
    """Stop an interrupted session so that it closes its target. A terminal's Ctrl-C reached it
    too and it is closing already; a SIGTERM to this process did not reach it, so it gets one
    (the plugin closes the target on SIGTERM as on Ctrl-C). SIGKILL only if that hangs."""
    try:
        process.wait(timeout=_CTRL_C_GRACE_S)
        return
    except subprocess.TimeoutExpired:
        process.terminate()
    try:
        process.wait(timeout=_INTERRUPT_GRACE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def exit_code(runs: list[TargetRun], gating: frozenset[str] = DEFAULT_GATING) -> ExitCode:
    """INFRASTRUCTURE (3) when a target never ran, FAILED (1) when a ``gating`` target failed a
    test, else OK."""
    if any(not run.ran for run in runs):
        return ExitCode.INFRASTRUCTURE
    if any(run.counts()["failed"] + run.counts()["error"]
           for run in runs if run.target in gating):
        return ExitCode.FAILED
    return ExitCode.OK


def chosen_targets(named: tuple[str, ...] | None, bootstrap: str | None,
                   recipe: Path | None = None) -> tuple[tuple[str, ...], frozenset[str]]:
    """The targets to run and those that gate the exit code: what the user named, plus the
    external broker at ``bootstrap`` and the cluster of ``recipe`` when given (either alone
    means "test that one"), else the defaults."""
    given = (*(("external",) if bootstrap else ()), *(("recipe",) if recipe else ()))
    if named is None:
        if given:
            return given, frozenset(given)
        return DEFAULT_TARGETS, DEFAULT_GATING
    named = (*named, *(target for target in given if target not in named))
    return named, frozenset(named)


# ---------------------------------------------------------------------------------------------
# Rendering

_SYMBOL = {"passed": "pass", "failed": "**FAIL**", "error": "**ERROR**", "skipped": "skip"}


def _summary(counts: Counter[str]) -> str:
    parts = [f"{counts[o]} {o}" for o in OUTCOMES if counts[o]]
    return ", ".join(parts) or "—"


def _rows(runs: list[TargetRun]) -> list[tuple[str, str, dict[str, dict[str, Any]]]]:
    """(nodeid, rule, {target: test}) for every test any target ran, in suite order."""
    order: dict[str, str] = {}
    for run in runs:
        for test in run.tests:
            order.setdefault(test["nodeid"], test.get("rule", ""))
    by_target = {run.target: {t["nodeid"]: t for t in run.tests} for run in runs}
    return [(nodeid, rule, {target: tests[nodeid] for target, tests in by_target.items()
                            if nodeid in tests})
            for nodeid, rule in order.items()]


def _suites_seen(runs: list[TargetRun]) -> list[str]:
    seen = {suite_of(t["nodeid"]) for run in runs for t in run.tests}
    return [s for s in SUITES if s in seen] + sorted(seen - set(SUITES))


def _findings(runs: list[TargetRun]) -> list[tuple[str, dict[str, Any]]]:
    return [(run.target, test) for run in runs for test in run.tests
            if test["outcome"] in ("failed", "error")]


# The targets that define the protocol: a failure elsewhere is read against what they did.
KAFKA_TARGETS = ("apache-kafka", "apache-kafka-kraft")


def _kafka_did(runs: list[TargetRun], nodeid: str) -> str:
    """What Apache Kafka did with the same test in this matrix, e.g. "apache-kafka: passed
    (its answer meets the rule)"; empty when no Kafka target ran it."""
    done = []
    for run in runs:
        if run.target not in KAFKA_TARGETS:
            continue
        test = next((t for t in run.tests if t["nodeid"] == nodeid), None)
        if test is None:
            continue
        if test["outcome"] == "passed":
            done.append(f"{run.target}: passed (its answer meets the rule)")
        else:
            done.append(f"{run.target}: {test['outcome']} ({test['reason']})")
    return "; ".join(done)


def render_markdown(runs: list[TargetRun]) -> str:
    targets = [run.target for run in runs]
    lines = ["| suite | " + " | ".join(targets) + " |", "|---|" + "---|" * len(targets)]
    for suite in _suites_seen(runs):
        lines.append(f"| {suite} | " + " | ".join(_summary(run.counts(suite)) for run in runs)
                     + " |")
    lines.append("| **wall time** | " + " | ".join(f"{run.wall_s:.0f} s" for run in runs) + " |")
    findings = _findings(runs)
    if findings:
        lines += ["", "Failures, with the Kafka rule each test checks:", ""]
        for target, test in findings:
            kafka = _kafka_did(runs, test["nodeid"]) if target not in KAFKA_TARGETS else ""
            lines.append(f"- **{target}** `{test['nodeid']}` — rule: {test.get('rule') or '?'}"
                         f" — observed: {_cell_text(test['reason'])}"
                         + (f" — Apache Kafka instead: {_cell_text(kafka)}" if kafka else ""))
    lines += ["", "| test | " + " | ".join(targets) + " |", "|---|" + "---|" * len(targets)]
    for nodeid, _rule, cells in _rows(runs):
        row = [_SYMBOL[cells[t]["outcome"]] if t in cells else "—" for t in targets]
        lines.append(f"| `{short_nodeid(nodeid)}` | " + " | ".join(row) + " |")
    skips = Counter((run.target, t["reason"]) for run in runs for t in run.tests
                    if t["outcome"] == "skipped")
    if skips:
        lines += ["", "Skip reasons:", ""]
        for (target, reason), count in sorted(skips.items()):
            lines.append(f"- {target} ({count}): {_cell_text(reason)}")
    return "\n".join(lines) + "\n"


def _cell_text(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;
font-size:13px;text-align:left}th{background:#f3f3f3}td.passed{background:#dff3df}
td.failed,td.error{background:#f8d0d0;font-weight:bold}td.skipped{background:#eee;color:#666}
code{font-size:12px}.rule{color:#555;font-size:12px}
"""


def render_html(runs: list[TargetRun]) -> str:
    targets = [run.target for run in runs]
    esc = html.escape
    head = "".join(f"<th>{esc(t)}</th>" for t in targets)
    summary = "".join(
        f"<tr><td>{esc(suite)}</td>"
        + "".join(f"<td>{esc(_summary(run.counts(suite)))}</td>" for run in runs) + "</tr>"
        for suite in _suites_seen(runs))
    rows = []
    for nodeid, rule, cells in _rows(runs):
        tds = []
        for target in targets:
            test = cells.get(target)
            if test is None:
                tds.append("<td>—</td>")
                continue
            title = esc(test["reason"], quote=True)
            tds.append(f'<td class="{test["outcome"]}" title="{title}">'
                       f'{esc(test["outcome"])}</td>')
        rows.append(f"<tr><td><code>{esc(short_nodeid(nodeid))}</code><div "
                    f'class="rule">{esc(rule)}</div></td>{"".join(tds)}</tr>')
    findings = "".join(
        f"<li><b>{esc(target)}</b> <code>{esc(test['nodeid'])}</code><br>rule: "
        f"{esc(test.get('rule') or '?')}<br>observed: {esc(test['reason'])}"
        + (f"<br>Apache Kafka instead: {esc(kafka)}"
           if target not in KAFKA_TARGETS and (kafka := _kafka_did(runs, test["nodeid"]))
           else "") + "</li>"
        for target, test in _findings(runs))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Conformance matrix"
            f"</title><style>{_CSS}</style></head><body><h1>Conformance matrix</h1>"
            f"<p>Generated {esc(time.strftime('%Y-%m-%d %H:%M:%S'))}. Hover a cell for the "
            f"skip reason or the failure.</p><table><tr><th>suite</th>{head}</tr>{summary}"
            f"</table><h2>Failures</h2><ul>{findings or '<li>none</li>'}</ul><h2>Every test"
            f"</h2><table><tr><th>test / rule</th>{head}</tr>{''.join(rows)}</table>"
            f"</body></html>\n")


def as_json(runs: list[TargetRun]) -> dict[str, Any]:
    """What ``matrix.json`` holds (see the module docstring)."""
    return {"schema_version": SCHEMA_VERSION, "targets": [asdict(run) for run in runs]}


def summary_json(runs: list[TargetRun], code: int, files: dict[str, str]) -> dict[str, Any]:
    """What ``kafka-harness matrix --json`` prints."""
    return {"schema_version": SCHEMA_VERSION, "exit_code": code, "files": files,
            "targets": {run.target: dict(run.counts()) for run in runs}}


def error_json(error: HarnessError) -> dict[str, Any]:
    """What ``kafka-harness matrix --json`` prints when the matrix could not be run."""
    return {"schema_version": SCHEMA_VERSION, "error": str(error),
            "exit_code": int(error.exit_code)}


def write(runs: list[TargetRun], out_dir: Path) -> dict[str, str]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "matrix.json", "markdown": out_dir / "matrix.md",
             "html": out_dir / "matrix.html"}
    paths["json"].write_text(json.dumps(as_json(runs), indent=1))
    paths["markdown"].write_text(render_markdown(runs))
    paths["html"].write_text(render_html(runs))
    return {kind: str(path) for kind, path in paths.items()}


def run_matrix(targets: tuple[str, ...], suites: tuple[str, ...], out_dir: Path, *,
               bootstrap: str | None = None, keyword: str | None = None,
               say: Callable[[str], object] = print, where: Path | None = None,
               backend: Backend = Backend.LOCAL, progress: SuiteProgress | None = None,
               recipe: Path | None = None) -> tuple[list[TargetRun], dict[str, str]]:
    """Run the suites (directories under ``where``, default :func:`suites_dir`) against every
    target in turn and write the matrix files. ``progress`` shows each session's live counts
    (default: a live line when stderr is a terminal, else a line through ``say`` every few
    tests)."""
    try:
        where = (where or suites_dir()).resolve()
    except FileNotFoundError as exc:
        raise MatrixError(str(exc)) from None
    missing = [s for s in suites if not (where / s).is_dir()]
    if missing:
        raise MatrixError(f"no suite directory for {', '.join(missing)} under {where}")
    if "external" in targets and not bootstrap:
        raise MatrixError("the external target needs --bootstrap-server HOST:PORT")
    if "recipe" in targets and recipe is None:
        raise MatrixError("the recipe target needs --recipe FILE")
    progress = progress or for_stderr(say)
    runs = []
    for target in targets:
        say(f"running {', '.join(suites)} against {target} …")
        run = run_target(target, suites, out_dir, keyword=keyword, where=where,
                         bootstrap=bootstrap if target == "external" else None,
                         backend=backend if target in DOCKER_KINDS else Backend.LOCAL,
                         progress=progress, recipe=recipe if target == "recipe" else None)
        runs.append(run)
        outcome = _summary(run.counts()) if run.ran else f"no results (see {run.log})"
        say(f"  {target}: {outcome} in {run.wall_s:.0f} s")
    return runs, write(runs, out_dir)
