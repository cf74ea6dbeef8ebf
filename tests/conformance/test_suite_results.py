"""The suite-results plugin's two files: every outcome once, in the results and in the progress
lines a live display reads - in a plain session and under pytest-xdist."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console

from harness.conformance.progress import LineProgress, LiveProgress, ProgressFile
from harness.waiting import wait_for

PLAIN_TESTS = '''
import pytest


def test_passes():
    """A rule that holds."""


def test_fails():
    """A rule that breaks
    across two lines [source].

    What the test does, which is not the rule."""
    assert False, "broken"


@pytest.mark.skip(reason="not offered")
def test_skipped():
    pass


@pytest.fixture
def broken_setup():
    raise RuntimeError("no target")


def test_errors(broken_setup):
    pass
'''
EXPECTED = Counter({"passed": 1, "failed": 1, "skipped": 1, "error": 1})


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["plain", "xdist"])
def test_each_outcome_is_written_once(tmp_path: Path, workers: list[str]):
    (tmp_path / "test_plain.py").write_text(PLAIN_TESTS)
    results, progress = tmp_path / "results.json", tmp_path / "progress.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "test_plain.py", *workers, "-q", "-p",
         "no:cacheprovider", "-p", "harness.conformance.results", "--suite-results", str(results),
         "--suite-progress", str(progress)], cwd=tmp_path, capture_output=True, text=True,
        timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    tests = json.loads(results.read_text())["tests"]
    assert Counter(t["outcome"] for t in tests) == EXPECTED
    assert next(t for t in tests if t["outcome"] == "failed")["rule"] \
        == "A rule that breaks across two lines [source]."
    lines = [json.loads(line) for line in progress.read_text().splitlines()]
    assert Counter(line["outcome"] for line in lines) == EXPECTED
    assert len({line["nodeid"] for line in lines}) == 4


def test_the_progress_reader_takes_whole_lines_only(tmp_path: Path):
    path = tmp_path / "progress.jsonl"
    reader = ProgressFile(path)
    assert reader.read_new() == 0  # no file yet: the session has not started
    path.write_text('{"nodeid": "a", "outcome": "passed"}\n{"nodeid": "b", "outc')
    assert reader.read_new() == 1 and reader.counts == Counter(passed=1)
    with path.open("a") as file:
        file.write('ome": "failed"}\n')
    assert reader.read_new() == 1 and reader.counts == Counter(passed=1, failed=1)


def test_line_progress_says_a_line_every_n_tests():
    said: list[str] = []
    progress = LineProgress(said.append, every=2)
    progress.started("tansu", Path("/out/tansu.log"))
    for counts in (Counter(passed=1), Counter(passed=2), Counter(passed=2, failed=1),
                   Counter(passed=2, failed=3)):
        progress.update("tansu", counts)
    assert said[0] == "  tansu: log /out/tansu.log"
    assert [line.split(" so far")[0] for line in said[1:]] == [
        "  tansu: 2 passed", "  tansu: 2 passed, 3 failed"]


def test_on_a_terminal_the_counts_are_one_live_line_that_goes_away():
    out = io.StringIO()
    progress = LiveProgress(Console(file=out, force_terminal=True, width=100))
    progress.started("reference", Path("/out/reference.log"))
    progress.update("reference", Counter(passed=2, skipped=1))
    wait_for(lambda: "reference: 2 passed, 1 skipped" in out.getvalue(), 5,
             "the live line to show the counts")
    progress.finished("reference")
    text = out.getvalue()
    assert text.startswith("  reference: log /out/reference.log\n")
    assert "\r" in text  # rewritten in place, not one line per update
    assert text.endswith("\x1b[2K")  # and erased when the session ends
