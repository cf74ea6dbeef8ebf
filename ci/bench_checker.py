"""Benchmark the Spark checker on synthetic histories; results go to bench-results/checker.json.

For each size a synthetic history with every anomaly planted is generated (or reused), then a
fresh process starts Spark (session and a first trivial job timed apart: start-up is paid once
per process, not per row) and checks it. In the same process, on the same files, the engine's
floor runs too: a bare job that reads the history once and shuffles every row by topic-partition
(a count and a hash of each t/p's rows, so no column is pruned), and the bound: the rows of the
check's three groupings (by process, by topic-partition, by value, as spark.groupings projects
them) shuffled by their keys and counted and hashed the same way: the data the check's plan must
move before it computes anything; and the scan alone (the history read once, hashed, not
shuffled), the part of each of those that is reading. All are measured in wall time and in
executor CPU-seconds, summed over the tasks of their stages from Spark's own status store (the
task metrics the UI shows; the load of other processes inflates wall time, much less CPU time).
The check runs twice in that process, first on the fresh JVM (cold) and then again (warm), and
the bound also runs alone in a fresh process of its own (cold): the check is compared with the
bound like for like, the first work of a JVM with the first and warm with warm. A first check
also pays the JIT's warm-up, which a bound measured after it does not (cpu_vs_bound, the first
check against the warm bound, is the figure the earlier rounds reported). The parent samples
the resident memory of that process (the Python driver) alone and with its JVM (which in local
mode runs the executors too). The pure-Python reference checks the smallest size too, as the
baseline. Every run must report exactly the counts the generator planted, or
the benchmark fails.

With --handoff the bound's three groupings are also handed to Python, as Arrow batches
(mapInArrow), each partition's rows only counted there: what any rule written as a Python
(pyarrow or numpy) kernel over a grouping pays before it computes anything. Its cost is
measured as the bound's is, and also as the CPU time of the whole process tree (the JVM, the
driver and the Python workers, whose CPU Spark's task metrics do not hold), for the bound too.

With --jvm-walk the same groupings are exchanged by their keys, sorted by them and by the
order a rule's pass would read them in (WALK_ORDER), and walked once by compiled JVM code
(ci/jvm_walk/Walk.java, compiled here with javac against pyspark's own jars and put on the
driver's class path) that reads every field of every row: what a rule written as one JVM pass
per grouping pays before it computes anything. Measured as the handoff is.

The check runs the by-topic-partition and by-process rules as the compiled passes
(harness/checker/jvm), as any classic session does; with --sql-rules the same process then
checks again with them as SQL (what a Spark Connect session runs), and both must report the
planted counts.

With --transactional the histories are transactional (harness.checker.synth_txn), and for each
the g1c rule is also timed alone: on the history's rows annotated with their transactions' fates
and cached as the check caches them (not timed), its Spark job collecting the write-read edges
between transactions and scipy's components on the driver; its share of the check is reported.

    .venv/bin/python ci/bench_checker.py --sizes 1M,10M,100M
    .venv/bin/python ci/bench_checker.py --sizes 1M,10M --transactional --no-reference
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from harness.checker import synth, synth_txn
from harness.checker.spark_rules import BY_PROCESS, BY_TP, BY_VALUE

RATES = {name: 2e-5 for name in synth.PLANTED}
UNSEEN = 0.0005
# Per transaction, each transaction anomaly: about 8 of each at 1M rows, 80 at 10M.
TXN_RATES = {name: 2e-4 for name in synth_txn.PLANTED}
# The order each grouping's rows would be read in by one pass of JVM rules, after its keys: a
# process's rows by seq (operations, send order, seq reuse), a topic-partition's by offset
# (offset ranks; the read pairs' per-process order is rebuilt in memory per t/p), a value's in
# any order.
WALK_ORDER = {BY_PROCESS: ("seq",), BY_TP: ("offset", "process", "seq"), BY_VALUE: ()}
WALK_SOURCE = Path(__file__).parent / "jvm_walk" / "Walk.java"


def _size(text: str) -> int:
    scale = {"K": 10**3, "M": 10**6, "G": 10**9}
    text = text.strip().upper()
    return int(float(text[:-1]) * scale[text[-1]]) if text[-1] in scale else int(text)


def _tree(pid: int) -> list[int]:
    """A process and all its descendants, found by every process's parent: whichever of a
    parent's threads started a child (the JVM starts Python workers from task threads)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


def _tree_rss(pid: int) -> tuple[int, int]:
    """Resident bytes of a process alone and with all its descendants (the driver JVM, which
    in local mode also runs the executors, is a child of the Python driver)."""
    own, total = 0, 0
    for current in _tree(pid):
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
                    total += rss
                    own = rss if current == pid else own
        except OSError:
            continue
    return own, total


def _measure(args: list[str]) -> tuple[dict, tuple[int, int]]:
    """Run this script as a child with `args`; its JSON answer and its peak RSS, alone and with
    its descendants."""
    child = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True)
    peak = (0, 0)
    while child.poll() is None:
        own, total = _tree_rss(child.pid)
        peak = (max(peak[0], own), max(peak[1], total))
        time.sleep(0.25)
    out = child.stdout.read() if child.stdout else ""
    if child.returncode != 0:
        raise SystemExit(f"benchmark child {args} failed with exit code {child.returncode}")
    return json.loads(out.strip().splitlines()[-1]), peak


def _stage_cpu(session: Any) -> dict[tuple[int, int], tuple[float, str]]:
    """Executor CPU-seconds and name of every stage Spark's status store holds, by (id, attempt)."""
    gateway = session.sparkContext._gateway
    store = session.sparkContext._jsc.sc().statusStore()
    stages = store.stageList(None, False, False, gateway.new_array(gateway.jvm.double, 0), None)
    found = {}
    for i in range(stages.size()):
        stage = stages.apply(i)
        found[(stage.stageId(), stage.attemptId())] = (stage.executorCpuTime() / 1e9, stage.name())
    return found


@contextmanager
def _timed(session: Any, into: dict[str, Any], name: str) -> Iterator[None]:
    """Wall seconds and executor CPU-seconds of the jobs run inside, and the costliest stages."""
    before = set(_stage_cpu(session))
    started = time.perf_counter()
    yield
    into[f"{name}_s"] = time.perf_counter() - started
    new = {k: v for k, v in _stage_cpu(session).items() if k not in before}
    into[f"{name}_cpu_s"] = sum(cpu for cpu, _ in new.values())
    into[f"{name}_stages"] = len(new)
    top = sorted(new.items(), key=lambda item: -item[1][0])[:8]
    into[f"{name}_top_stages"] = [
        {"stage": k[0], "cpu_s": round(cpu, 2), "name": label} for k, (cpu, label) in top
    ]


def _parquet(session: Any, directory: str) -> Any:
    """The history's Parquet files as the checker reads them (its schema)."""
    from harness.checker import spark

    files = sorted(str(p) for p in Path(directory).glob("*.parquet"))
    return session.read.schema(spark.SCHEMA).parquet(*files)


def _floor(session: Any, directory: str, size: int) -> int:
    """The engine's floor: read the history once, shuffle every row by topic-partition, count
    and hash each t/p's rows; the rows it saw."""
    from pyspark.sql import functions as F

    from harness.checker import cluster

    for key, value in cluster.job_settings(size, session.sparkContext.defaultParallelism).items():
        session.conf.set(key, value)
    frame = _parquet(session, directory)
    per_tp = frame.repartition("topic", "partition").groupBy("topic", "partition").agg(
        F.count(F.lit(1)).alias("rows"), F.bit_xor(F.xxhash64(*frame.columns)).alias("hash")
    )
    return sum(row["rows"] for row in per_tp.collect())


def _scan(session: Any, directory: str) -> int:
    """Reading alone: every row of the history once, hashed so no column is pruned, nothing
    shuffled; the part of the floor and of each of the bound's groupings that is the scan."""
    from pyspark.sql import functions as F

    frame = _parquet(session, directory)
    row = frame.agg(F.count(F.lit(1)).alias("rows"), F.bit_xor(F.xxhash64(*frame.columns))).first()
    return int(row["rows"])


def _bound(session: Any, directory: str) -> dict[str, int]:
    """What the check's plan moves before it computes anything: the rows of each of its three
    groupings (spark.groupings: by process, by topic-partition, by value; the check's own
    projections), each read and shuffled by its keys as the check does, with a count and a hash
    per key so no column is pruned. Rows shipped per grouping."""
    from functools import reduce

    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    from harness.checker import spark

    shipped = [
        rows.repartition(*keys)
        .groupBy(*keys)
        .agg(F.count(F.lit(1)).alias("rows"), F.bit_xor(F.xxhash64(*rows.columns)).alias("hash"))
        .agg(F.sum("rows").alias("rows"), F.bit_xor("hash").alias("hash"))
        .select(F.lit("+".join(keys)).alias("by"), "rows", "hash")
        for keys, rows in spark.grouping_rows(session, directory).items()
    ]
    return {row["by"]: row["rows"] for row in reduce(DataFrame.union, shipped).collect()}


def _handoff(session: Any, directory: str) -> dict[str, int]:
    """The bound's groupings each shuffled by its keys as the bound does, then handed to Python
    workers as Arrow batches that are only counted there: the floor of a rule computed by a
    Python kernel over a grouping. Rows handed over per grouping."""
    from functools import reduce

    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    from harness.checker import spark

    def count(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        yield pa.RecordBatch.from_pydict({"rows": [sum(b.num_rows for b in batches)]})

    handed = [
        rows.repartition(*keys).mapInArrow(count, "rows long")
        .agg(F.sum("rows").alias("rows"))
        .select(F.lit("+".join(keys)).alias("by"), "rows")
        for keys, rows in spark.grouping_rows(session, directory).items()
    ]
    return {row["by"]: row["rows"] for row in reduce(DataFrame.union, handed).collect()}


def _walk(session: Any, directory: str) -> dict[str, int]:
    """The bound's groupings each exchanged by its keys as the bound does, sorted by them and
    WALK_ORDER, and walked once by compiled JVM code reading every field (ci/jvm_walk): the
    floor of a rule computed in one JVM pass over a grouping. Rows walked per grouping."""
    from harness.checker import spark

    walked = {}
    walk = session.sparkContext._jvm.harness.bench.Walk
    for keys, rows in spark.grouping_rows(session, directory).items():
        ordered = rows.select(*keys, *[c for c in rows.columns if c not in keys])
        sorted_rows = ordered.repartition(*keys).sortWithinPartitions(*keys, *WALK_ORDER[keys])
        walked["+".join(keys)] = int(walk.walk(sorted_rows._jdf, len(keys))[0])
    return walked


def _compile_walk(into: Path) -> Path:
    """ci/jvm_walk compiled against the Spark jars pyspark ships, as a jar in `into`."""
    import shutil

    from pyspark.find_spark_home import _find_spark_home

    javac, jar = shutil.which("javac"), shutil.which("jar")
    if not (javac and jar):
        raise SystemExit("--jvm-walk needs a JDK's javac and jar on PATH (a JRE has neither)")
    classes = into / "classes"
    jars = Path(_find_spark_home()) / "jars"
    subprocess.run([javac, "--release", "17", "-d", str(classes), "-cp", f"{jars}/*",
                    str(WALK_SOURCE)], check=True)
    built = into / "walk.jar"
    subprocess.run([jar, "cf", str(built), "-C", str(classes), "."], check=True)
    return built


# The yardsticks measured beside the bound, by name (--handoff, --jvm-walk).
YARDSTICKS: dict[str, Callable[[Any, str], dict[str, int]]] = {"handoff": _handoff, "walk": _walk}


def _tree_cpu() -> float:
    """CPU-seconds of this process and its descendants so far (the JVM and Python workers
    included), reaped children counted through their parents."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in _tree(os.getpid()):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        total += sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
    return total


@contextmanager
def _tree_timed(into: dict[str, Any], name: str) -> Iterator[None]:
    started = _tree_cpu()
    yield
    into[f"{name}_tree_cpu_s"] = _tree_cpu() - started


@contextmanager
def _annotated(session: Any, directory: str) -> Iterator[tuple[Any, list[str]]]:
    """The history's rows annotated with their transactions' fates (spark_rules_txn.annotate)
    and cached on disk, as the check holds them before its rules run; materialized here, so
    that what is timed inside is what the check pays for g1c on top of them."""
    from dataclasses import replace

    from pyspark import StorageLevel

    from harness.checker import spark_rules_txn
    from harness.checker.spark_load import open_history, release
    from harness.checker.spark_rules import intern_topics

    with open_history(session, directory) as (_, h, _small):
        interned, topics, on, _ = intern_topics(h)
        annotated = spark_rules_txn.annotate(interned, on)
        rows = annotated.rows.persist(StorageLevel.DISK_ONLY)
        txns = annotated.txns.persist(StorageLevel.DISK_ONLY)
        try:
            rows.count(), txns.count()
            yield replace(annotated, rows=rows, txns=txns), topics
        finally:
            release(rows)
            release(txns)


def _child(mode: str, directory: str) -> None:
    if mode == "reference":
        from harness.checker import rules
        from harness.history import read_history

        started = time.perf_counter()
        events = read_history(directory)
        result = rules.check_events(events)
        elapsed = time.perf_counter() - started
        answer: dict[str, Any] = {"check_s": elapsed}  # no Spark: no start-up, no floor
    elif mode == "bound":  # the bound alone, in a JVM as cold as the check's first
        from harness.checker import cluster, spark_session

        size = sum(p.stat().st_size for p in Path(directory).iterdir())
        session = spark_session.start_session(history_bytes=size)
        session.range(1).count()
        # As the check sets them (spark_load.open_history), which in the other child ran first.
        cores = session.sparkContext.defaultParallelism
        for key, value in cluster.job_settings(size, cores).items():
            session.conf.set(key, value)
        answer = {}
        with _timed(session, answer, "bound_cold"):
            answer["bound_cold_rows"] = _bound(session, directory)
        session.stop()
        print(json.dumps(answer))
        return
    elif mode == "startup":  # what a short chaos run's check pays before its first job
        from harness.checker import spark_session

        started = time.perf_counter()
        session = spark_session.start_session(history_bytes=0)
        up = time.perf_counter()
        session.range(1).count()
        answer = {"session_s": up - started, "first_job_s": time.perf_counter() - up}
        session.stop()
        print(json.dumps(answer))
        return
    else:
        from harness.checker import spark, spark_jvm, spark_session

        yardsticks = mode.split("+")[1:]
        size = sum(p.stat().st_size for p in Path(directory).iterdir())
        started = time.perf_counter()
        session = spark_session.start_session(history_bytes=size)
        up = time.perf_counter()
        session.range(1).count()  # the first job pays for the executors and JIT warm-up
        ready = time.perf_counter()
        answer = {
            "session_s": up - started, "first_job_s": ready - up, "startup_s": ready - started
        }
        if not spark_jvm.available(session):
            raise SystemExit(f"no compiled passes: {spark_session.passes_missing}")
        with _timed(session, answer, "check"):
            result = spark.check(session, directory)
        # Again, on the JVM the first check warmed: what the check costs beside a bound that
        # is measured warm below (the first check also pays the JIT's warm-up).
        with _timed(session, answer, "check_warm"):
            again = spark.check(session, directory)
        if again.anomalies != result.anomalies:
            raise SystemExit("the second check of the same history found other anomalies")
        if "sql" in yardsticks:
            yardsticks.remove("sql")
            with _timed(session, answer, "check_sql"):
                answer["counts_sql"] = {
                    k: v.count
                    for k, v in spark.check(session, directory, passes=False).anomalies.items()
                }
        # After the check, so that the floor runs on a JVM at least as warm as the check's.
        with _timed(session, answer, "floor"):
            answer["floor_rows"] = _floor(session, directory, size)
        with _timed(session, answer, "bound"), _tree_timed(answer, "bound"):
            answer["bound_rows"] = _bound(session, directory)
        for name in yardsticks:
            with _timed(session, answer, name), _tree_timed(answer, name):
                answer[f"{name}_rows"] = YARDSTICKS[name](session, directory)
        if yardsticks:
            # The bound again, after the yardsticks: the JVM as warm for all.
            with _timed(session, answer, "bound_again"), _tree_timed(answer, "bound_again"):
                _bound(session, directory)
        with _timed(session, answer, "scan"):
            answer["scan_rows"] = _scan(session, directory)
        if result.stats.get("txns"):
            from harness.checker import spark_rules_txn

            # g1c alone, on the annotated rows cached as the check caches them: its Spark job
            # (the write-read edges between transactions, to the driver) and scipy's
            # components and explanations on the driver.
            with _annotated(session, directory) as (annotated, topics), \
                    _timed(session, answer, "g1c"):
                answer["g1c_count"] = len(spark_rules_txn.g1c(annotated, topics))
        session.stop()
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
    parser.add_argument("--startups", type=int, default=3,
                        help="fresh processes timing start-up as a short run's check pays it")
    parser.add_argument("--transactional", action="store_true",
                        help="transactional histories (synth_txn): the transaction rules' cost, "
                        "g1c's share of the check")
    parser.add_argument("--handoff", action="store_true",
                        help="also time the bound's groupings handed to Python as Arrow batches")
    parser.add_argument("--jvm-walk", action="store_true",
                        help="also time the bound's groupings sorted and walked by JVM code")
    parser.add_argument("--sql-rules", action="store_true",
                        help="also check with the rules as SQL, as Spark Connect does")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(*args.child)
        return

    console = Console()
    yardsticks = [name for name, on in (("handoff", args.handoff), ("walk", args.jvm_walk))
                  if on]
    if args.jvm_walk:
        from pyspark.find_spark_home import _find_spark_home

        from harness.checker import jvm_passes

        built = _compile_walk(Path(tempfile.mkdtemp(prefix="kh-walk-")))
        # The children's JVM finds the class on the driver's class path (local mode: the
        # executors are that JVM). Given so, the class path replaces the one the session
        # asks for, so the checker's passes go on it too.
        passes = jvm_passes.jar(_find_spark_home())
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"--driver-class-path {built}:{passes} pyspark-shell"
    results = []
    startups = []
    for _ in range(args.startups):
        with console.status("Spark start-up for a small history"):
            startups.append(_measure(["--child", "startup", "-"])[0])
    if startups:
        totals = sorted(a["session_s"] + a["first_job_s"] for a in startups)
        console.print(f"start-up to the first job (small history): {totals}")
    sizes = sorted(_size(s) for s in args.sizes.split(","))
    for rows in sizes:
        directory = args.data / f"{'txn-' if args.transactional else ''}rows-{rows}"
        marker = directory / "expected.json"
        if not marker.exists():
            with console.status(f"generating {rows:,} rows in {directory}"):
                started = time.perf_counter()
                if args.transactional:
                    made = synth_txn.generate(directory,
                                              synth_txn.TxnSpec(rows=rows, rates=TXN_RATES))
                else:
                    made = synth.generate(directory,
                                          synth.Spec(rows=rows, rates=RATES, unseen=UNSEEN))
                marker.write_text(json.dumps({"rows": made.rows, "expected": made.expected}))
            console.print(f"generated {made.rows:,} rows in {time.perf_counter() - started:.1f}s")
        planted = json.loads(marker.read_text())
        engines = ["spark"] + ([] if args.no_reference or rows != sizes[0] else ["reference"])
        for engine in engines:
            with console.status(f"{engine} checker on {planted['rows']:,} rows"):
                extra = [*yardsticks, *(["sql"] if args.sql_rules else [])]
                mode = "+".join([engine, *extra]) if engine == "spark" else engine
                answer, peak = _measure(["--child", mode, str(directory)])
            if answer["counts"] != planted["expected"]:
                raise SystemExit(
                    f"{engine} on {rows:,} rows: counts {answer['counts']} "
                    f"!= planted {planted['expected']}"
                )
            if answer.get("counts_sql", planted["expected"]) != planted["expected"]:
                raise SystemExit(f"the SQL rules on {rows:,} rows: counts {answer['counts_sql']}")
            if engine == "spark":
                with console.status(f"the bound alone, cold, on {planted['rows']:,} rows"):
                    answer.update(_measure(["--child", "bound", str(directory)])[0])
                if answer["bound_cold_rows"] != answer["bound_rows"]:
                    raise SystemExit(f"the cold bound saw {answer['bound_cold_rows']}")
                # The floor, the scan and the bound's by-process grouping each see every row.
                seen = {"floor": answer["floor_rows"], "scan": answer["scan_rows"],
                        "bound by process": answer["bound_rows"]["process"]}
                for name, count in seen.items():
                    if count != planted["rows"]:
                        raise SystemExit(f"{name} on {rows:,} rows saw {count:,} rows")
            result = {
                "engine": engine,
                "rows": planted["rows"],
                "bytes": sum(p.stat().st_size for p in directory.glob("*.parquet")),
                "peak_rss_mb": round(peak[1] / 2**20),
                "peak_python_rss_mb": round(peak[0] / 2**20),
                "rows_per_s": round(planted["rows"] / answer["check_s"]),
                **{k: round(v, 2) if isinstance(v, float) else v for k, v in answer.items()
                   if k not in ("counts", "counts_sql")},
            }
            if engine == "spark":
                result["time_vs_floor"] = round(answer["check_s"] / answer["floor_s"], 2)
                result["cpu_vs_floor"] = round(answer["check_cpu_s"] / answer["floor_cpu_s"], 2)
                result["bound_cpu_vs_floor"] = round(
                    answer["bound_cpu_s"] / answer["floor_cpu_s"], 2
                )
                result["cpu_vs_bound"] = round(answer["check_cpu_s"] / answer["bound_cpu_s"], 2)
                # Like for like: each the first work of a fresh JVM, or each on a warm one.
                result["cold_cpu_vs_bound"] = round(
                    answer["check_cpu_s"] / answer["bound_cold_cpu_s"], 2)
                result["warm_cpu_vs_bound"] = round(
                    answer["check_warm_cpu_s"] / answer["bound_cpu_s"], 2)
                if "check_sql_cpu_s" in answer:
                    result["sql_cpu_vs_bound"] = round(
                        answer["check_sql_cpu_s"] / answer["bound_cpu_s"], 2)
                    console.print(
                        f"check: {answer['check_cpu_s']:.1f} executor CPU-s with the passes, "
                        f"{answer['check_sql_cpu_s']:.1f} with the SQL rules; the bound "
                        f"{answer['bound_cpu_s']:.1f}")
                for name in yardsticks:
                    if answer[f"{name}_rows"] != answer["bound_rows"]:
                        raise SystemExit(f"{name} saw {answer[f'{name}_rows']} rows")
                    tree = min(answer["bound_tree_cpu_s"], answer["bound_again_tree_cpu_s"])
                    executor = min(answer["bound_cpu_s"], answer["bound_again_cpu_s"])
                    result[f"{name}_tree_cpu_vs_bound"] = round(
                        answer[f"{name}_tree_cpu_s"] / tree, 2)
                    result[f"{name}_cpu_vs_bound"] = round(answer[f"{name}_cpu_s"] / executor, 2)
                    console.print(
                        f"{name}: {answer[f'{name}_tree_cpu_s']:.1f} CPU-s (tree), "
                        f"{answer[f'{name}_cpu_s']:.1f} executor; bound "
                        f"{answer['bound_tree_cpu_s']:.1f} then "
                        f"{answer['bound_again_tree_cpu_s']:.1f} (tree), "
                        f"{answer['bound_cpu_s']:.1f} then {answer['bound_again_cpu_s']:.1f} "
                        f"(executor): {result[f'{name}_tree_cpu_vs_bound']}× the bound (tree), "
                        f"{result[f'{name}_cpu_vs_bound']}× (executor)")
                if "g1c_s" in answer:
                    if answer["g1c_count"] != planted["expected"]["g1c"]:
                        raise SystemExit(f"g1c alone found {answer['g1c_count']} components")
                    result["g1c_share"] = round(answer["g1c_s"] / answer["check_s"], 3)
                    result["g1c_cpu_share"] = round(
                        answer["g1c_cpu_s"] / answer["check_cpu_s"], 3
                    )
            results.append(result)
            console.print({k: v for k, v in result.items() if not k.endswith("top_stages")})
            if "g1c_share" in result:
                console.print(f"g1c: {result['g1c_s']:.1f} s of the check's "
                              f"{result['check_s']:.1f} s ({result['g1c_share']:.1%}), "
                              f"{result['g1c_cpu_s']:.1f} of {result['check_cpu_s']:.1f} "
                              f"executor CPU-s ({result['g1c_cpu_share']:.1%})")

    spark_runs = [r for r in results if r["engine"] == "spark"]
    for before, after in zip(spark_runs, spark_runs[1:], strict=False):
        after["time_ratio_vs_previous"] = round(after["check_s"] / before["check_s"], 2)
        after["rows_ratio_vs_previous"] = round(after["rows"] / before["rows"], 2)
    load = os.getloadavg()
    table = Table(title=f"Checker benchmark ({os.cpu_count()} cores, load {load[0]:.1f})")
    columns = ("engine", "rows", "session s", "first job s", "check s", "check CPU s",
               "floor s", "floor CPU s", "× floor (wall / CPU)", "bound CPU s (× floor)",
               "check × bound (CPU; cold / warm)", "rows/s", "peak RSS MB (Python)", "time ×")
    for column in columns:
        table.add_column(column, justify="left" if column == "engine" else "right")
    for r in results:
        ratio = r.get("time_ratio_vs_previous")
        spark_only = r["engine"] == "spark"
        table.add_row(
            r["engine"],
            f"{r['rows']:,}",
            f"{r['session_s']:.1f}" if spark_only else "",
            f"{r['first_job_s']:.1f}" if spark_only else "",
            f"{r['check_s']:.1f}",
            f"{r['check_cpu_s']:.1f}" if spark_only else "",
            f"{r['floor_s']:.1f}" if spark_only else "",
            f"{r['floor_cpu_s']:.1f}" if spark_only else "",
            f"{r['time_vs_floor']} / {r['cpu_vs_floor']}" if spark_only else "",
            f"{r['bound_cpu_s']:.1f} ({r['bound_cpu_vs_floor']}×)" if spark_only else "",
            f"{r['cpu_vs_bound']} ({r['cold_cpu_vs_bound']} / {r['warm_cpu_vs_bound']})"
            if spark_only else "",
            f"{r['rows_per_s']:,}",
            f"{r['peak_rss_mb']} ({r['peak_python_rss_mb']})",
            f"{ratio} for {r['rows_ratio_vs_previous']}× rows" if ratio else "",
        )
    console.print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(
        {"cores": os.cpu_count(), "load_average": [round(x, 2) for x in load],
         "transactional": args.transactional,
         "startup_small_history": [{k: round(v, 2) for k, v in a.items()} for a in startups],
         "results": results}, indent=1))
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
