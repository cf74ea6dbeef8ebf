"""The pull-request workflow runs the project's own commands; GitHub reads the canonical copy."""

from __future__ import annotations

import re
import runpy
import shlex
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CANONICAL = ROOT / "ci" / "workflows" / "pull-request.yml"
GITHUB_COPY = ROOT / ".github" / "workflows" / "pull-request.yml"


def _workflow() -> dict:
    return yaml.safe_load(CANONICAL.read_text())


def _commands() -> list[str]:
    return [step["run"] for job in _workflow()["jobs"].values() for step in job["steps"]
            if "run" in step]


def test_github_reads_an_identical_copy():
    assert GITHUB_COPY.read_bytes() == CANONICAL.read_bytes()


def test_it_gates_pull_requests_with_every_job_the_issue_names():
    workflow = _workflow()
    assert "pull_request" in workflow[True]  # YAML 1.1 reads the key `on` as True
    assert set(workflow["jobs"]) == {"lint", "tests", "docker", "chaos"}
    uploads = [step for job in workflow["jobs"].values() for step in job["steps"]
               if step.get("uses", "").startswith("actions/upload-artifact")]
    assert all(step["if"] == "always()" for step in uploads) and len(uploads) == 3


def test_every_script_and_tool_it_calls_exists():
    for command in _commands():
        for word in shlex.split(command):
            if re.fullmatch(r"ci/[\w./-]+\.(sh|py)", word):
                assert (ROOT / word).is_file(), f"{word} in {command!r}"
            if word.startswith(".venv/bin/"):
                assert (ROOT / word).exists(), f"{word} in {command!r}"


def test_lint_is_the_same_as_the_test_command():
    ruff = next(c for c in _commands() if "ruff check" in c)
    assert ruff in (ROOT / "ci" / "test.sh").read_text()


def test_the_test_command_says_where_its_time_went(tmp_path):
    """ci/test.sh prints ci/junit_times.py's summary: seconds summed per file and directory
    from pytest's JUnit XML, setup and teardown included, costliest first."""
    assert "ci/junit_times.py" in (ROOT / "ci" / "test.sh").read_text()
    junit_times = runpy.run_path(str(ROOT / "ci" / "junit_times.py"))
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite>'
        '<testcase classname="tests.a.test_x" name="one" time="3.5"/>'
        '<testcase classname="tests.a.test_x" name="two[p]" time="1.5"/>'
        '<testcase classname="suites.b.test_y" name="three" time="60"/>'
        '<testcase classname="suites.b.test_y.TestGroup" name="four" time="2"/>'
        '</testsuite></testsuites>')
    spent = junit_times["seconds_by_file"](junit)
    assert spent == {"tests/a/test_x.py": 5.0, "suites/b/test_y.py": 62.0}
    lines = junit_times["summary"](spent)
    assert lines[0] == "1.1 min in 2 files; by directory:"
    assert lines[1].split() == ["1.0", "min", "suites/b"]
    assert lines[-1].split() == ["5", "s", "tests/a/test_x.py"]
