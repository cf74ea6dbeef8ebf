"""A short run's check on Spark, warm: where its seconds go when the data is nothing.

Every judged test and every short `run` that asks for Spark checks a history of a few hundred or
thousand rows. Its cost is not the data: it is the driver planning each DataFrame call over the
plan beneath it, and Spark's scheduling of a few dozen one-task stages. This benchmark makes two
small synthetic histories (harness.checker.synth, and synth_txn for the transaction rules, every
anomaly planted), starts one session as a small history's check does (local[2], a small
history's settings), checks each history once to warm the JVM, then --checks more times, and
reports each check's wall seconds, the seconds its Spark jobs took from submission to
completion (Spark's status store), and the rest: the driver's. Every check must count exactly
what was planted. Results go to bench-results/checker-short.json.

    ci/bench short --checks 4
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.checker import spark, spark_session, synth, synth_txn

ROWS = 5_000


def _job_seconds(session: Any, seen: set[int]) -> float:
    """Submission-to-completion seconds of the finished jobs not in `seen` (then added to it)."""
    jobs = session.sparkContext._jsc.sc().statusStore().jobsList(None)
    total = 0.0
    for i in range(jobs.size()):
        job = jobs.apply(i)
        if job.jobId() in seen or not job.completionTime().isDefined():
            continue
        seen.add(job.jobId())
        submitted = job.submissionTime().get().getTime()
        total += (job.completionTime().get().getTime() - submitted) / 1000
    return total


def _checks(console: Console, session: Any, directory: Path, expected: dict[str, int],
            rows: int, timed: int) -> dict[str, Any]:
    """One warm-up check of `directory`, then `timed` checks: each one's wall and job seconds."""
    seen: set[int] = set()
    checks = []
    for i in range(timed + 1):
        _job_seconds(session, seen)
        begun = time.perf_counter()
        result = spark.check(session, directory)
        wall = time.perf_counter() - begun
        jobs = _job_seconds(session, seen)
        counts = {k: a.count for k, a in result.anomalies.items()}
        if counts != expected:
            raise SystemExit(f"{directory.name}: counts {counts} != planted {expected}")
        console.print(f"{directory.name} check {i}{' (warm-up)' if i == 0 else ''}: {wall:.1f} s, "
                      f"jobs {jobs:.1f} s, driver {wall - jobs:.1f} s")
        if i:
            checks.append({"wall_s": round(wall, 2), "jobs_s": round(jobs, 2)})
    return {"rows": rows, "checks": checks,
            "median_wall_s": statistics.median(c["wall_s"] for c in checks) if checks else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=4, help="timed checks per history")
    parser.add_argument("--out", type=Path, default=Path("bench-results/checker-short.json"))
    args = parser.parse_args()
    console = Console()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kafka-harness-bench-short-") as where:
        made = {
            "plain": synth.generate(Path(where, "plain"), synth.Spec(
                rows=ROWS, partitions=2, rates={n: 1e-3 for n in synth.PLANTED}, unseen=0.01)),
            "transactional": synth_txn.generate(Path(where, "transactional"), synth_txn.TxnSpec(
                rows=ROWS, partitions=3, rates={n: 2e-3 for n in synth_txn.PLANTED})),
        }
        started = time.perf_counter()
        session = spark_session.start_session("local[2]", history_bytes=0)
        console.print(f"session {time.perf_counter() - started:.1f} s")
        try:
            for name, history in made.items():
                results[name] = _checks(console, session, Path(where, name), history.expected,
                                        history.rows, args.checks)
        finally:
            session.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"cores": os.cpu_count(), "load_average": os.getloadavg(),
                                    "results": results}, indent=1))
    console.print({name: r["median_wall_s"] for name, r in results.items()})
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
