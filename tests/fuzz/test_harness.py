"""`ci/fuzz` itself: it finds a planted bug, reports it with a failing exit code and saves an
input that reproduces it; a clean run reports its figures and exits 0."""

import json
import subprocess
from pathlib import Path

import fuzz_broker
import fuzz_target
import pytest

FUZZ = Path(fuzz_broker.__file__).resolve().parent / "fuzz"


def run_fuzz(*args: str, timeout: float = 300) -> tuple[subprocess.CompletedProcess, dict]:
    proc = subprocess.run([str(FUZZ), *args], capture_output=True, text=True,
                          timeout=timeout, check=False)
    work = Path(args[args.index("--work") + 1])
    (run_dir,) = work.iterdir()
    return proc, json.loads((run_dir / "summary.json").read_text())


def test_planted_bug_is_found_reported_and_reproducible(tmp_path):
    proc, summary = run_fuzz("--plant", "--runs", "20000", "--seed", "1",
                             "--work", str(tmp_path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "crashes 1" in proc.stdout and "PlantedBug" in proc.stderr
    (name,) = summary["crashes"]
    assert name.startswith("crash-")
    crash = (tmp_path / summary["date"] / name).read_bytes()
    # The saved input reproduces the bug, and only the bug: the real target copes with it.
    with pytest.raises(fuzz_broker.PlantedBug):
        fuzz_broker.planted(fuzz_target.test_one_input)(crash)
    fuzz_target.test_one_input(crash)
    replay = subprocess.run([str(FUZZ), "--replay", str(tmp_path / summary["date"] / name),
                             "--plant"], capture_output=True, text=True, timeout=60,
                            check=False)
    assert replay.returncode != 0 and "PlantedBug" in replay.stderr


def test_clean_run_reports_its_figures(tmp_path):
    proc, summary = run_fuzz("--runs", "3000", "--seed", "2", "--work", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert summary["crashes"] == []
    assert summary["executions"] >= 3000
    # The seeds alone reach a few hundred edges; 3,000 mutations reach more.
    assert int(summary["coverage_edges"]) > int(summary["coverage_at_start"]) > 100
    assert f"executions {summary['executions']}" in proc.stdout


def test_parse_log_reads_libfuzzer_figures():
    log = ("INFO: Seed: 1\n"
           "#57\tINITED cov: 2190 ft: 3300 corp: 57/9000b exec/s: 0 rss: 90Mb\n"
           "#5000\tNEW    cov: 2300 ft: 3500 corp: 80/11kb lim: 300 exec/s: 900 rss: 95Mb\n"
           "#10000\tDONE   cov: 2321 ft: 3612 corp: 91/12kb lim: 300 exec/s: 1000 rss: 99Mb\n"
           "Done 10000 runs in 10 second(s)\n"
           "stat::number_of_executed_units: 10000\n"
           "stat::average_exec_per_sec:     1000\n"
           "stat::new_units_added:          34\n")
    figures = fuzz_broker.parse_log(log)
    assert figures["executions"] == 10000 and figures["done"]
    assert (figures["cov"], figures["ft"], figures["inited_cov"]) == ("2321", "3612", "2190")
    assert figures["average_exec_per_sec"] == 1000 and figures["new_units_added"] == 34
