"""Start-up of the programs everyone pays for, this checkout against an earlier commit.

    .venv/bin/python ci/bench_startup.py --against REF [--rounds 21]

``kafka-harness --help`` (every command starts the same way), loading the pytest plugin, and a
pytest session that collects one test (pytest loads the plugin into every session of the
environment, and its report header names the target's version) are timed as whole processes,
each in this checkout and in a worktree of ``REF`` made for the run, rounds interleaved (A B A B
…) so that a drifting machine moves both. Both run with this checkout's virtualenv, the tree's
own modules first on ``sys.path`` (``PYTHONPATH``).
Figures: CPU seconds (user + system, the children's rusage) and wall seconds per run, the
median of each, and the median of the per-round ratios this/REF — the figure to quote on a
noisy machine. Written to ``bench-results/startup.json``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import machine_info, print_results, write_json_atomically

REPO = Path(__file__).resolve().parent.parent
SESSION = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", "test_one.py"]
COMMANDS = {
    "kafka-harness --help": ["-m", "harness.cli", "--help"],
    "import the pytest plugin": ["-c", "import pytest, harness.plugin.pytest_plugin"],
    "a pytest session collecting one test": SESSION,
}
# Where the plugin lived before the rooms (harness/pytest_plugin.py), for an earlier tree.
OLD_PLUGIN = "harness.pytest_plugin"


def _timed(argv: list[str], tree: Path, scratch: Path) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of ``python argv`` with ``tree``'s modules, in
    ``scratch`` (which holds one test file for the pytest session)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, *argv], cwd=scratch, check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "PYTHONPATH": str(tree)})
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def _argv_at(tree: Path, argv: list[str]) -> list[str]:
    """The plugin moved with the rooms: an earlier tree loads it by its old name (the installed
    entry point names the new one)."""
    if (tree / "harness" / "plugin" / "pytest_plugin.py").exists():
        return argv
    if argv == SESSION:
        return [*argv, "-p", "no:kafka_harness", "-p", OLD_PLUGIN]
    return [part.replace("harness.plugin.pytest_plugin", OLD_PLUGIN) for part in argv]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="the commit to compare with")
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    results: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as scratch_dir:
        scratch = Path(scratch_dir)
        (scratch / "test_one.py").write_text("def test_one():\n    pass\n")
        earlier = scratch / "earlier"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(earlier), args.against],
                       cwd=REPO, check=True)
        try:
            for name, argv in COMMANDS.items():
                for tree in (REPO, earlier):  # warm the page cache and the .pyc files
                    _timed(_argv_at(tree, argv), tree, scratch)
                here: list[tuple[float, float]] = []
                there: list[tuple[float, float]] = []
                for _ in range(args.rounds):
                    here.append(_timed(argv, REPO, scratch))
                    there.append(_timed(_argv_at(earlier, argv), earlier, scratch))
                pairs = list(zip(here, there, strict=True))
                results[name] = {
                    "cpu_s_median": statistics.median(c for c, _ in here),
                    "cpu_s_median_earlier": statistics.median(c for c, _ in there),
                    "wall_s_median": statistics.median(w for _, w in here),
                    "wall_s_median_earlier": statistics.median(w for _, w in there),
                    "cpu_ratio_median": statistics.median(a[0] / b[0] for a, b in pairs),
                    "wall_ratio_median": statistics.median(a[1] / b[1] for a, b in pairs),
                }
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(earlier)], cwd=REPO,
                           check=False)
    rows = [[name, f"{r['cpu_s_median']:.3f} s", f"{r['cpu_s_median_earlier']:.3f} s",
             f"{r['cpu_ratio_median']:.3f}x", f"{r['wall_ratio_median']:.3f}x"]
            for name, r in results.items()]
    print_results(f"start-up, this checkout against {args.against} ({args.rounds} rounds)", rows,
                  args.markdown, headers=("what", "CPU here", f"CPU at {args.against}",
                                          "CPU ratio", "wall ratio"))
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, text=True,
                          capture_output=True, check=True).stdout.strip()
    write_json_atomically(REPO / "bench-results" / "startup.json", {
        "machine": machine_info(), "commit": head, "against": args.against,
        "rounds": args.rounds, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
