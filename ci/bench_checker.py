"""Benchmark the Spark checker on synthetic histories; results go to bench-results/checker.json.

For each size a synthetic history with every anomaly planted is generated (or reused), then a
fresh process starts Spark (timed apart: start-up is paid once per run, not per row) and checks
it. The parent samples the resident memory of that process and its JVM to report the driver's
peak. The pure-Python reference checks the smallest size too, as the baseline. Every run must
report exactly the counts the generator planted, or the benchmark fails.

    .venv/bin/python ci/bench_checker.py --sizes 1M,10M,100M
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from harness.checker import synth

RATES = {name: 2e-5 for name in synth.PLANTED}
UNSEEN = 0.0005


def _size(text: str) -> int:
    scale = {"K": 10**3, "M": 10**6, "G": 10**9}
    text = text.strip().upper()
    return int(float(text[:-1]) * scale[text[-1]]) if text[-1] in scale else int(text)


def _tree_rss(pid: int) -> int:
    """Resident bytes of a process and all its descendants (the driver JVM is a child)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        todo += children.get(current, [])
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


def _measure(args: list[str]) -> tuple[dict, int]:
    """Run this script as a child with `args`; its JSON answer and its peak tree RSS."""
    child = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True)
    peak = 0
    while child.poll() is None:
        peak = max(peak, _tree_rss(child.pid))
        time.sleep(0.25)
    out = child.stdout.read() if child.stdout else ""
    if child.returncode != 0:
        raise SystemExit(f"benchmark child {args} failed with exit code {child.returncode}")
    return json.loads(out.strip().splitlines()[-1]), peak


def _child(mode: str, directory: str) -> None:
    if mode == "reference":
        from harness.checker import rules
        from harness.history import read_history

        started = time.perf_counter()
        events = read_history(directory)
        result = rules.check_events(events)
        elapsed = time.perf_counter() - started
        answer = {"startup_s": 0.0, "check_s": elapsed}
    else:
        from harness.checker import spark

        size = sum(p.stat().st_size for p in Path(directory).iterdir())
        started = time.perf_counter()
        session = spark.start_session(history_bytes=size)
        session.range(1).count()  # the first job pays for the executors and JIT warm-up
        ready = time.perf_counter()
        result = spark.check(session, directory)
        done = time.perf_counter()
        session.stop()
        answer = {"startup_s": ready - started, "check_s": done - ready}
    answer["counts"] = {k: v.count for k, v in result.anomalies.items()}
    print(json.dumps(answer))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1M,10M,100M", help="comma-separated row counts")
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(tempfile.gettempdir()) / "kafka-harness-bench",
        help="where generated histories are kept between runs (they are large)",
    )
    parser.add_argument("--out", type=Path, default=Path("bench-results/checker.json"))
    parser.add_argument("--no-reference", action="store_true", help="skip the pure-Python run")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(*args.child)
        return

    console = Console()
    results = []
    sizes = sorted(_size(s) for s in args.sizes.split(","))
    for rows in sizes:
        directory = args.data / f"rows-{rows}"
        marker = directory / "expected.json"
        if not marker.exists():
            with console.status(f"generating {rows:,} rows in {directory}"):
                started = time.perf_counter()
                made = synth.generate(directory, synth.Spec(rows=rows, rates=RATES, unseen=UNSEEN))
                marker.write_text(json.dumps({"rows": made.rows, "expected": made.expected}))
            console.print(f"generated {made.rows:,} rows in {time.perf_counter() - started:.1f}s")
        planted = json.loads(marker.read_text())
        engines = ["spark"] + ([] if args.no_reference or rows != sizes[0] else ["reference"])
        for engine in engines:
            with console.status(f"{engine} checker on {planted['rows']:,} rows"):
                answer, peak = _measure(["--child", engine, str(directory)])
            if answer["counts"] != planted["expected"]:
                raise SystemExit(
                    f"{engine} on {rows:,} rows: counts {answer['counts']} "
                    f"!= planted {planted['expected']}"
                )
            results.append(
                {
                    "engine": engine,
                    "rows": planted["rows"],
                    "startup_s": round(answer["startup_s"], 2),
                    "check_s": round(answer["check_s"], 2),
                    "rows_per_s": round(planted["rows"] / answer["check_s"]),
                    "peak_rss_mb": round(peak / 2**20),
                    "bytes": sum(p.stat().st_size for p in directory.glob("*.parquet")),
                }
            )
            console.print(results[-1])

    spark_runs = [r for r in results if r["engine"] == "spark"]
    for before, after in zip(spark_runs, spark_runs[1:], strict=False):
        after["time_ratio_vs_previous"] = round(after["check_s"] / before["check_s"], 2)
        after["rows_ratio_vs_previous"] = round(after["rows"] / before["rows"], 2)
    table = Table(title=f"Checker benchmark ({os.cpu_count()} cores)")
    for column in ("engine", "rows", "start-up s", "check s", "rows/s", "peak RSS MB", "time ×"):
        table.add_column(column, justify="left" if column == "engine" else "right")
    for r in results:
        ratio = r.get("time_ratio_vs_previous")
        table.add_row(
            r["engine"],
            f"{r['rows']:,}",
            f"{r['startup_s']:.1f}",
            f"{r['check_s']:.1f}",
            f"{r['rows_per_s']:,}",
            str(r["peak_rss_mb"]),
            f"{ratio} for {r['rows_ratio_vs_previous']}× rows" if ratio else "",
        )
    console.print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"cores": os.cpu_count(), "results": results}, indent=1))
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
