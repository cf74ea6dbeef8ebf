"""`kafka-harness run` as a user starts it: the suites' log path and live counts while they run,
and ``.harness/runs/latest`` pointing at the newest run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness.run.latest import point_latest

KAFKA_HARNESS = str(Path(sys.executable).parent / "kafka-harness")


def test_latest_is_a_relative_link_replaced_by_each_newer_run(tmp_path: Path):
    runs = tmp_path / "runs"
    first, second = runs / "20261125-120000-seed1", runs / "20261125-120100-seed2"
    for run in (first, second):
        run.mkdir(parents=True)
    link = point_latest(first)
    assert link == runs / "latest" and os.readlink(link) == first.name
    point_latest(second)
    assert link.resolve() == second.resolve()
    assert sorted(p.name for p in runs.iterdir()) == [first.name, second.name, "latest"]


def test_a_run_shows_the_suites_log_and_counts_and_becomes_the_latest(tmp_path: Path):
    """Run from an empty directory without --dir: its run lands in ./.harness/runs."""
    done = subprocess.run(
        [KAFKA_HARNESS, "run", "--suites", "protocol", "--duration", "3", "--brokers", "1",
         "--nemesis", "none", "--producers", "1", "--consumers", "1",
         "--partitions", "1", "--rate", "20", "--json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "400"})  # the runner's console wraps at 80 otherwise
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    run_dir = Path(result["dir"])
    # --engine auto, the default: a short run's history is judged without a JVM, and says so.
    engine = result["engine"]
    assert (engine["name"], engine["asked"]) == ("python", "auto") and 0 < engine["rows"] \
        <= engine["threshold"]
    assert json.loads((run_dir / "run.json").read_text())["engine"] == engine
    latest = tmp_path / ".harness" / "runs" / "latest"
    assert latest.is_symlink() and latest.resolve() == run_dir.resolve()
    # Still the run's own random seed: pointing `latest` did not make the CLI choose it.
    assert json.loads((run_dir / "history" / "run-manifest.json").read_text())[
        "seed_given"] is False
    lines = done.stderr.splitlines()
    started = lines.index(f"  reference: log {run_dir / 'suites' / 'reference.log'}")
    counts = [i for i, line in enumerate(lines) if line.startswith("  reference: ")
              and " so far (" in line]
    assert counts and counts[0] > started, done.stderr  # live counts while the session ran
    assert result["suites"]["counts"]["passed"] >= 10
