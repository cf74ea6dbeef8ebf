"""The test files' order on pytest-xdist workers: costliest first (tests/scheduling.py)."""

from __future__ import annotations

import json
import re
import runpy
from collections import Counter
from pathlib import Path

import pytest

from tests.scheduling import ONE_WORKER, costliest_first, file_costs, unit

ROOT = Path(__file__).resolve().parent.parent


def test_files_go_costliest_first_unknown_ones_before_all():
    nodeids = ["t/a.py::one", "t/a.py::two", "t/b.py::one", "t/c.py::one", "t/d.py::one",
               "t/b.py::two"]
    costs = {"t/a.py": 5.0, "t/b.py": 90.0, "t/d.py": 5.0}
    order = [nodeids[i] for i in costliest_first(nodeids, costs)]
    assert order == ["t/c.py::one", "t/b.py::one", "t/b.py::two", "t/a.py::one", "t/a.py::two",
                     "t/d.py::one"]
    assert costliest_first(nodeids, {}) == [0, 1, 2, 5, 3, 4]  # a file's tests stay together


def test_the_checker_directory_is_one_unit_costing_its_files_sum():
    assert ONE_WORKER == ("tests/checker/",)
    assert unit("tests/checker/test_spark.py::test_zoo") == "tests/checker"
    assert unit("tests/checkers.py::test_one") == "tests/checkers.py"
    nodeids = ["tests/checker/test_a.py::one", "tests/x.py::one", "tests/checker/test_b.py::one",
               "tests/y.py::one"]
    costs = {"tests/checker/test_a.py": 30.0, "tests/checker/test_b.py": 40.0, "tests/x.py": 60.0,
             "tests/y.py": 1.0}
    assert [nodeids[i] for i in costliest_first(nodeids, costs)] == [
        "tests/checker/test_a.py::one", "tests/checker/test_b.py::one", "tests/x.py::one",
        "tests/y.py::one"]
    # A file the table does not know makes its whole unit's cost unknown: first.
    del costs["tests/checker/test_b.py"]
    costs["tests/x.py"] = 1000.0
    assert costliest_first(nodeids, costs)[:2] == [0, 2]


def test_the_table_junit_times_writes_is_the_one_scheduling_reads(tmp_path):
    junit_times = runpy.run_path(str(ROOT / "ci" / "junit_times.py"))
    spent = Counter({"tests/a/test_x.py": 12.34, "suites/b/test_y.py": 600.0})
    junit_times["write_costs"](spent, tmp_path / "costs.json")
    assert file_costs(tmp_path / "costs.json") == {"tests/a/test_x.py": 12.3,
                                                   "suites/b/test_y.py": 600.0}
    assert file_costs(tmp_path / "missing.json") == {}


def test_the_committed_table_names_files_that_exist():
    """A renamed file would lose its place silently: every file in the table exists."""
    table = json.loads((ROOT / "tests" / "file_costs.json").read_text())["seconds"]
    assert table and [f for f in table if not (ROOT / f).is_file()] == []


def _run_order(pytester: pytest.Pytester, *args: str) -> list[str]:
    result = pytester.runpytest_subprocess("-p", "tests.scheduling", "-v", "-p",
                                           "no:cacheprovider", *args)
    result.assert_outcomes(passed=4)
    # "test_x.py::test_one PASSED" run alone, "[gw0] [ 25%] PASSED test_x.py::test_one" on xdist
    return [re.findall(r"test_\w+\.py::\w+", line)[0]
            for line in result.stdout.lines if "PASSED" in line and "::" in line]


def test_a_worker_is_handed_the_files_in_that_order(pytester, monkeypatch):
    """End to end through pytest-xdist: one worker, `--dist loadfile`, the table under the
    rootdir. Without xdist pytest keeps its own order."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_cheap="def test_one(): pass\ndef test_two(): pass",
                        test_costly="def test_one(): pass",
                        test_new="def test_one(): pass")
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "file_costs.json").write_text(json.dumps(
        {"seconds": {"test_cheap.py": 1.0, "test_costly.py": 300.0}}))
    assert _run_order(pytester, "-n", "1", "--dist", "loadfile", "--no-loadscope-reorder") == [
        "test_new.py::test_one", "test_costly.py::test_one", "test_cheap.py::test_one",
        "test_cheap.py::test_two"]
    assert _run_order(pytester) == [
        "test_cheap.py::test_one", "test_cheap.py::test_two", "test_costly.py::test_one",
        "test_new.py::test_one"]


def test_the_checker_directory_runs_on_one_worker(pytester, monkeypatch):
    """End to end through two pytest-xdist workers: the two costliest files, handed out one
    to each worker as files, both run on one worker because they are in tests/checker."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeini("[pytest]\n")
    checker = pytester.path / "tests" / "checker"
    checker.mkdir(parents=True)
    for name in ("test_a", "test_b"):
        (checker / f"{name}.py").write_text("def test_one(): pass\n")
    pytester.makepyfile(test_x="def test_one(): pass", test_y="def test_one(): pass")
    (pytester.path / "tests" / "file_costs.json").write_text(json.dumps({"seconds": {
        "tests/checker/test_a.py": 300.0, "tests/checker/test_b.py": 250.0, "test_x.py": 5.0,
        "test_y.py": 1.0}}))
    result = pytester.runpytest_subprocess("-p", "tests.scheduling", "-v", "-p",
                                           "no:cacheprovider", "-n", "2", "--dist", "loadfile",
                                           "--no-loadscope-reorder")
    result.assert_outcomes(passed=4)
    worker = {m[1]: m[0] for line in result.stdout.lines
              for m in re.findall(r"\[(gw\d)\].*PASSED (\S+)::", line)}
    assert set(worker) == {"tests/checker/test_a.py", "tests/checker/test_b.py", "test_x.py",
                           "test_y.py"}
    assert worker["tests/checker/test_a.py"] == worker["tests/checker/test_b.py"]
