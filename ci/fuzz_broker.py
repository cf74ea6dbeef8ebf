"""Coverage-guided fuzzing of the reference broker's request path (atheris on libFuzzer).

    ci/fuzz [--runs N] [--seed S] [--timeout SEC] [--max-len BYTES] [--work DIR]

The target is `ci/fuzz_target.py` (what is fuzzed and what counts as a crash is written
there and in docs/fuzzing.md); the seed corpus is `ci/fuzz_seeds/`, frames captured from real
clients by `ci/fuzz_capture.py`. libFuzzer runs in a child process, so that a crash, a hang
(`-timeout`) or an out-of-memory kill ends the child, not the report: the parent reads the
child's libFuzzer statistics and the artifacts it saved, prints executions, exec/s, coverage,
corpus size and crashes, and writes them to `summary.json` in the run's directory.

Exit codes: 0 no crash; 1 a crash, hang or OOM (each input is saved as crash-*/timeout-*/oom-*
in the run directory; replay one with `ci/fuzz --replay FILE`); 2 usage; 3 the fuzzer could
not run (atheris missing, or libFuzzer stopped without its final statistics).

`--plant` adds a deliberate bug to the target (a frame with a negative correlation id raises
PlantedBug); `tests/fuzz/test_harness.py` uses it to prove the harness finds and reports one.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

CI = Path(__file__).resolve().parent
REPO = CI.parent
SEEDS = CI / "fuzz_seeds"
DEFAULT_WORK = REPO / ".harness" / "fuzz"  # ignored by git: corpora are large and churn
ARTIFACT_KINDS = ("crash", "timeout", "oom", "leak", "slow-unit")
# The packages whose code is instrumented for coverage: the bytes-to-request path.
INSTRUMENTED = ["harness.wire", "kio", "reference_broker", "fuzz_target"]


class PlantedBug(RuntimeError):
    """The deliberate bug of `--plant`: not a protocol error, so it must count as a crash."""


def planted(target):  # type: ignore[no-untyped-def]
    """`target` with a bug a fuzzer must find: frame-mode inputs with a negative correlation id
    (the sign bit of the header's bytes 4..7) raise PlantedBug."""

    def buggy(data: bytes) -> None:
        if len(data) >= 9 and not data[0] & 1 and data[5] & 0x80:
            raise PlantedBug("planted bug: negative correlation id")
        target(data)

    return buggy


def _child(argv: list[str], plant: bool) -> None:
    """Runs under libFuzzer: instrument the request path, then fuzz it."""
    import logging

    import atheris

    # The broker logs each refused batch and each undecodable one it keeps; at thousands of
    # executions a second that is only noise around libFuzzer's report.
    logging.disable(logging.CRITICAL)
    sys.path.insert(0, str(CI))
    with atheris.instrument_imports(include=INSTRUMENTED):
        import fuzz_target

        from harness.wire import protocol
        from reference_broker.server import kafka_apis

        # kio imports a request's schema module on first use; load every version the broker
        # decodes now, inside the block, so those modules are instrumented too.
        for api_key, handler in kafka_apis.registry().items():
            for version in range(handler.min_version, handler.max_version + 1):
                protocol.request_class(api_key, version)
    target = planted(fuzz_target.test_one_input) if plant else fuzz_target.test_one_input
    atheris.Setup(argv, target)
    atheris.Fuzz()


_DONE = re.compile(r"^#(\d+)\s+DONE\s+(.*)$")
_FIELD = re.compile(r"(cov|ft|corp|exec/s|rss): (\S+)")
_STAT = re.compile(r"^stat::(\w+):\s+(\d+)")
_PROGRESS = re.compile(r"^#(\d+)\s+(?:INITED|NEW|REDUCE|pulse|DONE|RELOAD)\s+(.*)$")


def parse_log(text: str) -> dict:
    """libFuzzer's figures from its stderr: the last status line and the final statistics."""
    figures: dict = {}
    for line in text.splitlines():
        match = _PROGRESS.match(line)
        if match:
            figures["executions"] = int(match.group(1))
            for name, value in _FIELD.findall(match.group(2)):
                figures[name] = value
            if _DONE.match(line):
                figures["done"] = True
            if "INITED" in line:
                figures["inited_cov"] = dict(_FIELD.findall(match.group(2))).get("cov")
        stat = _STAT.match(line)
        if stat:
            figures[stat.group(1)] = int(stat.group(2))
    if "number_of_executed_units" in figures:
        figures["executions"] = figures["number_of_executed_units"]
    return figures


def _artifacts(run_dir: Path) -> list[Path]:
    return sorted(p for p in run_dir.iterdir()
                  if p.is_file() and p.name.split("-")[0] in ARTIFACT_KINDS
                  or p.name.startswith("slow-unit-"))


def run(args: argparse.Namespace) -> int:
    try:
        import atheris  # noqa: F401
    except ImportError:
        print("ci/fuzz: atheris is not installed (it is in the dev extra: "
              "pip install -e '.[dev]')", file=sys.stderr)
        return 3
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    run_dir = (args.work / stamp).resolve()
    corpus = run_dir / "corpus"
    corpus.mkdir(parents=True)
    seeds = args.seeds.resolve()
    child = [
        sys.executable, str(Path(__file__).resolve()), "--child",
        *(["--plant"] if args.plant else []),
        "--", str(corpus), str(seeds),
        f"-runs={args.runs}", f"-seed={args.seed}", f"-timeout={args.timeout}",
        f"-max_len={args.max_len}", f"-rss_limit_mb={args.rss_limit_mb}",
        f"-artifact_prefix={run_dir}/", "-print_final_stats=1",
        "-print_pcs=0", "-reload=0",
    ]
    log_path = run_dir / "fuzz.log"
    print(f"ci/fuzz: {args.runs} executions, seed {args.seed}, seeds {seeds}, "
          f"run directory {run_dir}", flush=True)
    started = time.monotonic()
    with log_path.open("w") as log:
        proc = subprocess.run(child, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                              env={**os.environ, "PYTHONHASHSEED": "0"}, check=False)
    elapsed = time.monotonic() - started
    text = log_path.read_text(errors="replace")
    figures = parse_log(text)
    found = _artifacts(run_dir)
    summary = {
        "date": stamp,
        "runs_requested": args.runs,
        "seed": args.seed,
        "planted_bug": args.plant,
        "executions": figures.get("executions"),
        "exec_per_s": figures.get("average_exec_per_sec"),
        "seconds": round(elapsed, 1),
        "coverage_edges": figures.get("cov"),
        "coverage_at_start": figures.get("inited_cov"),
        "features": figures.get("ft"),
        "corpus": figures.get("corp"),
        "new_units": figures.get("new_units_added"),
        "peak_rss_mb": figures.get("peak_rss_mb"),
        "seed_inputs": sum(1 for p in seeds.iterdir() if p.is_file()),
        "crashes": [p.name for p in found],
        "child_exit": proc.returncode,
        "log": str(log_path),
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"ci/fuzz: executions {summary['executions']} in {summary['seconds']} s "
          f"({summary['exec_per_s']} exec/s); coverage {summary['coverage_edges']} edges "
          f"(from {summary['coverage_at_start']} after the seeds), {summary['features']} "
          f"features; corpus {summary['corpus']}; crashes {len(found)}")
    if found or (proc.returncode != 0 and "ERROR" in text):
        for path in found:
            print(f"ci/fuzz: CRASH input saved as {path} (replay: ci/fuzz --replay {path})")
        print("\n".join(_error_excerpt(text)), file=sys.stderr)
        return 1
    if proc.returncode != 0 or not figures.get("done"):
        print(f"ci/fuzz: libFuzzer exited {proc.returncode} without finishing; see {log_path}",
              file=sys.stderr)
        print("\n".join(text.splitlines()[-20:]), file=sys.stderr)
        return 3
    return 0


def _error_excerpt(text: str) -> list[str]:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "Uncaught Python exception" in line or line.startswith("==") and "ERROR" in line \
                or "ALARM" in line:
            return lines[i:i + 40]
    return lines[-40:]


def replay(path: Path, plant: bool) -> int:
    """Run one saved input through the target (uninstrumented) and show what it raises."""
    sys.path.insert(0, str(CI))
    import fuzz_target

    target = planted(fuzz_target.test_one_input) if plant else fuzz_target.test_one_input
    target(path.read_bytes())
    print(f"ci/fuzz: {path} ran without a crash")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        plant = len(argv) > 1 and argv[1] == "--plant"
        rest = argv[argv.index("--") + 1:]
        _child([sys.argv[0], *rest], plant)
        return 0
    parser = argparse.ArgumentParser(prog="ci/fuzz", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100_000, help="executions (default 100000)")
    parser.add_argument("--seed", type=int, default=1, help="libFuzzer's random seed")
    parser.add_argument("--timeout", type=int, default=10,
                        help="seconds one input may take before it counts as a hang")
    parser.add_argument("--max-len", type=int, default=8192, help="largest input generated")
    parser.add_argument("--rss-limit-mb", type=int, default=2048)
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK,
                        help="where each run's directory goes (default .harness/fuzz)")
    parser.add_argument("--seeds", type=Path, default=SEEDS)
    parser.add_argument("--plant", action="store_true", help="add the deliberate bug")
    parser.add_argument("--replay", type=Path, metavar="FILE",
                        help="run one saved input through the target instead of fuzzing")
    args = parser.parse_args(argv)
    if args.replay is not None:
        return replay(args.replay, args.plant)
    if args.runs < 1:
        parser.error("--runs must be >= 1")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
