"""Perf benchmark: the reference broker, Apache Kafka 3.9.2 and Tansu measured with the field's
own yardsticks — Kafka's ``ProducerPerformance``, ``ConsumerPerformance`` and
``EndToEndLatency`` (its kafka-tools jar, ``java -cp``) and, as a non-JVM cross-check, ``kcat``.

Why: the broker benchmark drives brokers with the Python confluent-kafka client, which tops out
before the brokers do. Kafka's own tools are what Kafka's published figures were made with, so
the same scenarios, scaled to this machine, say how our broker compares on Kafka's terms.

One run: every target is started — reference and apache-kafka as a 3-broker ZooKeeper cluster
(``LocalCluster``), Tansu as its single node with its own (in-memory) storage — and each
scenario runs on one target right after the other (same tool, same settings, same topic
layout), so the shared machine's changing load hits every target's figure of a scenario
alike. A layout a target cannot have (3 replicas on one Tansu node) is reported as not
applicable, never guessed.
During every scenario the broker processes' CPU-seconds (utime + stime deltas from /proc,
summed over a cluster's brokers; ZooKeeper not counted) and peak RSS (sampled) are recorded.
Then a standalone reference broker serves ``produce-1`` and ``consume-1`` (or the scenarios
``--profile`` names) once more under cProfile (not part of the figures; py-spy cannot attach to
a process on this machine), and the top functions by own time go to
``bench-results/perf-profile-reference-{produce,consume,<scenario>}.txt``.

Goal (issue 17): reference ≥ 1.0× Apache Kafka on every throughput scenario and latency p99
≤ 1.5× Kafka's, in the same run. The machine is small and shared: the ratios are the figures.
Exit codes: 0 measured (a missed goal shows as "missed"), 1 a measurement failed, 2 usage,
3 a target could not start. A scenario that fails on one target is shown as failed (with why),
the others still run, and the exit code is 1.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import perf_report
import perf_tools
from bench_common import machine_info, write_json_atomically
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from perf_profile import ProfiledReference, write_summary
from perf_scenarios import (
    SCENARIOS,
    TRANSACTION_MS,
    Isolation,
    Measure,
    Outcome,
    Scenario,
    Target,
    Work,
    median_round,
)
from rich.console import Console

from harness.cluster.apache_kafka import KafkaDistribution
from harness.cluster.errors import PeerStartError
from harness.cluster.local import LocalCluster
from harness.cluster.peers import TansuBroker, tansu_binary
from harness.cluster.registry import BROKER_KINDS
from harness.cluster.spec import ClusterSpec
from harness.cluster.zookeeper import find_java
from harness.schema import SCHEMA_VERSION
from harness.waiting import ClusterWaitTimeout, wait_for

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "bench-results"
DEFAULT_OUTPUT = RESULTS / "perf.json"
BROKERS = 3
TOOL_TIMEOUT_S = 300.0
PROFILED = ("produce-1", "consume-1")
"""What ``--profile`` profiles by default; their files are named by their work
(``perf-profile-reference-produce.txt``), any other profiled scenario's by its name."""
SOURCE_FACTOR = 2
"""A consume scenario reads the first half of a topic holding twice its records, so every
partition still has data when the consumer stops and the figure is the broker's rate with
every partition backlogged. Read to its end, a topic measures the Java consumer's tail instead:
once one partition of a broker is drained, the consumer sends that broker a fetch for it alone,
the broker parks it for ``fetch.max.wait.ms`` (500 ms) as min-bytes 1 asks, and the broker's
other partition waits behind it — 1 MB per 500 ms. How long that lasts depends on how unevenly
the producer filled the partitions, not on the broker: with one partition of 6 holding 200,000
records and the rest 100 each, Apache Kafka 3.9.2 served them at 18,351 records/s and the
reference at 18,724. Reading all of a 6 M-record topic gave the reference 1.04 M/s and Kafka
2.54 M/s; reading the first 3 M of the same two topics gave 2.80 M and 2.06 M
(docs/benchmarks.md)."""


class BenchError(RuntimeError):
    """A tool failed or its output lacked its figures; the scenario's number would mean nothing."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    names = [s.name for s in SCENARIOS]
    parser = argparse.ArgumentParser(
        prog="ci/bench_perf.py",
        description="Kafka's own perf tools (ProducerPerformance, ConsumerPerformance, "
        "EndToEndLatency) and kcat against the reference broker, Apache Kafka 3.9 and Tansu, "
        "side by side, with each broker's CPU per million records and peak RSS.")
    parser.add_argument("--records", type=int, default=500_000,
                        help="records per producer or consumer at 100 B (1 KB scenarios send a "
                        "fifth; latency scenarios at most 2,000 / 50,000) (default: %(default)s)")
    parser.add_argument("--scenarios", default=",".join(names),
                        help=f"comma-separated, of {', '.join(names)} (default: all)")
    parser.add_argument("--targets", default=",".join(Target),
                        help=f"comma-separated, of {', '.join(Target)} (default: all)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure each scenario this many times, rounds interleaved across "
                        "targets, and report the median round (default: %(default)s)")
    parser.add_argument("--no-profile", action="store_true",
                        help="skip the profiled pass over a standalone reference broker")
    parser.add_argument("--profile", default=",".join(PROFILED),
                        help="comma-separated scenarios the profiled pass runs, of those a "
                        "single node can hold (default: %(default)s)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT,
                        help="JSON results (default: %(default)s)")
    parser.add_argument("--markdown", action="store_true",
                        help="print the summary as Markdown (for docs/benchmarks.md)")
    args = parser.parse_args(argv)
    if args.records < 10:
        parser.error(f"--records must be >= 10, got {args.records}")
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    args.scenarios = _choose(parser, "--scenarios", args.scenarios, names)
    args.profile = _choose(parser, "--profile", args.profile,
                           [s.name for s in SCENARIOS if s.replicas == 1])
    args.targets = [Target(t) for t in _choose(parser, "--targets", args.targets, list(Target))]
    return args


def _choose(parser: argparse.ArgumentParser, option: str, value: str,
            known: Sequence[str]) -> list[str]:
    """The comma-separated choices in ``value``, in the order of ``known``; a usage error
    (exit 2) naming what is unknown, or that nothing was chosen."""
    chosen = {v.strip() for v in value.split(",") if v.strip()}
    unknown = sorted(chosen - set(known))
    if unknown or not chosen:
        parser.error(f"{option} takes {', '.join(known)}; "
                     + (f"unknown: {', '.join(unknown)}" if unknown else "got none"))
    return [k for k in known if k in chosen]


@dataclass
class Running:
    """A started target: where clients connect, its broker pids, how many replicas it can
    hold, and how to stop it."""

    target: Target
    version: str
    bootstrap: str
    pids: list[int]
    max_replicas: int
    stop: object  # a callable; kept loose so a cluster and a single broker both fit
    logs: dict[int, Path] = field(default_factory=dict)  # pid -> that broker's log

    def dead(self) -> str:
        """Which broker processes have exited, with the end of each one's log ('' if none):
        the run directory is temporary, so this is all that is kept of why."""
        notes = []
        for pid, log in self.logs.items():
            stat = Path(f"/proc/{pid}/stat")
            if not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] in "ZX":
                tail = log.read_text(errors="replace")[-400:] if log.exists() else ""
                notes.append(f"broker pid {pid} has exited; its log ends: {tail!r}")
        return "; ".join(notes)
    filled: dict[tuple[int, int, int, int], tuple[str, int]] = field(default_factory=dict)
    """Scenario.source_key -> a topic of that layout and how many records it holds."""


def start_target(target: Target, run_dir: Path) -> Running:
    if target is Target.TANSU:
        broker = TansuBroker(run_dir / "tansu")
        broker.start()
        version = Path(tansu_binary()).name
        assert broker.pid is not None
        return Running(target, version, broker.bootstrap, [broker.pid], 1, broker.stop,
                       logs={broker.pid: broker.log_path})
    kind = BROKER_KINDS[target.value]()
    cluster = LocalCluster(ClusterSpec(brokers=BROKERS), kind=kind, run_dir=run_dir / target)
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    logs = {node.pid: node.log_path for node in cluster.brokers.values() if node.pid}
    return Running(target, kind.version(), cluster.bootstrap, list(logs), BROKERS, cluster.stop,
                   logs=logs)


def create_topic(bootstrap: str, scenario: Scenario, name: str | None = None) -> str:
    """A fresh topic with the scenario's layout, returned once every partition has a leader."""
    topic = name or f"perf-{scenario.name}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    admin.create_topics([NewTopic(topic, scenario.partitions, scenario.replicas)])[topic].result(
        timeout=60)

    def led() -> bool:
        meta = admin.list_topics(topic, timeout=5).topics.get(topic)
        return (meta is not None and meta.error is None
                and len(meta.partitions) == scenario.partitions
                and all(p.leader >= 0 for p in meta.partitions.values()))
    wait_for(led, 60, f"every partition of {topic} to have a leader")
    return topic


class Bench:
    """Runs scenarios on one started target; the tools, kcat and scratch files are shared."""

    def __init__(self, tools: perf_tools.Tools, kcat: str, scratch: Path, records: int,
                 console: Console) -> None:
        self.tools = tools
        self.kcat = kcat
        self.scratch = scratch
        self.records = records
        self.console = console
        self._consumer_configs: dict[Isolation, Path] = {}

    def consumer_config(self, isolation: Isolation) -> Path | None:
        """The properties file giving a consumer ``isolation`` (None for the default)."""
        if isolation is Isolation.READ_UNCOMMITTED:
            return None
        if isolation not in self._consumer_configs:
            self._consumer_configs[isolation] = perf_tools.consumer_config(
                self.scratch / f"consumer-{isolation}.properties", isolation.value)
        return self._consumer_configs[isolation]

    def producer(self, bootstrap: str, topic: str, records: int, scenario: Scenario,
                 throughput: int = -1) -> list[str]:
        """ProducerPerformance as ``scenario`` has it; a transactional one gets a
        transactional id of its own."""
        transaction = (perf_tools.Transaction(f"perf-txn-{uuid.uuid4().hex[:8]}",
                                              scenario.transaction_ms)
                       if scenario.transactional else None)
        return self.tools.producer(bootstrap, topic, records, scenario.record_bytes,
                                   scenario.acks, throughput, transaction)

    def run_all(self, commands: list[list[str]]) -> list[str]:
        """Start every command at once (separate processes), wait for all; their stdouts.
        A non-zero exit is a BenchError with the tail of its stderr."""
        procs = []
        try:
            for command in commands:
                err = (self.scratch / f"stderr-{uuid.uuid4().hex[:6]}.txt").open("w+")
                procs.append((subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err,
                                               text=True, cwd=self.scratch), err))
            outputs = []
            for command, (proc, err) in zip(commands, procs, strict=True):
                out, _ = proc.communicate(timeout=TOOL_TIMEOUT_S)
                err.seek(0)
                if proc.returncode != 0:
                    tool = next((part.rsplit(".", 1)[-1] for part in command
                                 if part.startswith("org.apache.kafka.tools.")),
                                Path(command[0]).name)
                    raise BenchError(f"{tool} exited {proc.returncode}: {err.read()[-800:]}")
                outputs.append(out)
            return outputs
        finally:
            for proc, err in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                err.close()

    def source_topic(self, running: Running, scenario: Scenario) -> tuple[str, int]:
        """A topic of ``scenario``'s layout holding ``SOURCE_FACTOR`` times the records a
        consume scenario reads, and how many that is: the one a single-producer scenario of
        the same ``source_key`` wrote when it ran (``produce-1`` for ``consume-1``,
        ``txn-produce`` for ``txn-consume``), topped up (unmeasured, written the same way),
        else one filled now (unmeasured)."""
        key = scenario.source_key
        wanted = SOURCE_FACTOR * scenario.records(self.records)
        topic, held = running.filled.get(key) or (create_topic(running.bootstrap, scenario), 0)
        if held < wanted:
            self.run_all([self.producer(running.bootstrap, topic, wanted - held, scenario)])
            running.filled[key] = (topic, wanted)
        return running.filled[key]

    def warm_up(self, running: Running, transactions: bool = False) -> None:
        """A few records through a producer and a consumer group before anything is measured:
        the group coordinator's first use creates ``__consumer_offsets`` (50 partitions on a
        cluster), which would otherwise land in the first consume scenario's time and CPU.
        With ``transactions``, a transactional producer too: the transaction coordinator's
        first use creates ``__transaction_state`` (50 partitions) the same way. A target whose
        transactions fail here is logged and kept: its transactional scenarios then fail,
        each shown as failed with why, and its other scenarios are still measured."""
        scenario = Scenario("warm-up", Work.PRODUCE, "", partitions=1)
        topic = create_topic(running.bootstrap, scenario)
        self.run_all([self.tools.producer(running.bootstrap, topic, 1000, 100, "1")])
        self.run_all([self.tools.consumer(running.bootstrap, topic, 1000, "perf-warm-up")])
        if transactions:
            transactional = replace(scenario, acks="all", transaction_ms=TRANSACTION_MS)
            try:
                self.run_all([self.producer(running.bootstrap, topic, 1000, transactional)])
            except BenchError as exc:
                self.console.log(f"{running.target}: transactional warm-up failed: {exc}")

    def measure(self, running: Running, scenario: Scenario) -> Outcome:
        """One scenario; a failure (a tool's non-zero exit, output without figures, a topic
        that never got leaders) is recorded in the outcome, and the run goes on."""
        outcome = Outcome(scenario.name, running.target)
        try:
            return self._measure(running, scenario, outcome)
        except (BenchError, ClusterWaitTimeout, KafkaException,
                subprocess.TimeoutExpired) as exc:
            dead = running.dead()
            outcome.failed = " ".join(str(exc).split())[:300] + (f" — {dead}" if dead else "")
            return outcome

    def _measure(self, running: Running, scenario: Scenario, outcome: Outcome) -> Outcome:
        if scenario.replicas > running.max_replicas:
            outcome.not_applicable = (f"{running.target} is {running.max_replicas} node: "
                                      f"no {scenario.replicas} replicas")
            return outcome
        bootstrap, records = running.bootstrap, scenario.records(self.records)
        work = scenario.work
        topic = ""
        if work in (Work.CONSUME, Work.KCAT_CONSUME):
            topic, outcome.topic_records = self.source_topic(running, scenario)
        else:
            topic = create_topic(bootstrap, scenario)
        commands = self.commands(scenario, bootstrap, topic, records)
        with perf_tools.ResourceSampler(running.pids) as sampler:
            started = time.perf_counter()
            outputs = self.run_all(commands)
            outcome.seconds = time.perf_counter() - started
        outcome.usage = sampler.usage
        self.read(scenario, outputs, records, outcome)
        if work is Work.PRODUCE and scenario.clients == 1:
            running.filled.setdefault(scenario.source_key, (topic, records))
        return outcome

    def commands(self, scenario: Scenario, bootstrap: str, topic: str,
                 records: int) -> list[list[str]]:
        tools, work, size, acks = self.tools, scenario.work, scenario.record_bytes, scenario.acks
        if work is Work.PRODUCE:
            return [self.producer(bootstrap, topic, records, scenario)
                    for _ in range(scenario.clients)]
        if work is Work.FIXED_RATE:
            return [self.producer(bootstrap, topic, records, scenario, scenario.rate)]
        if work is Work.CONSUME:
            config = self.consumer_config(scenario.isolation)
            return [tools.consumer(bootstrap, topic, records, f"perf-{uuid.uuid4().hex[:8]}",
                                   config=config)
                    for _ in range(scenario.clients)]
        if work is Work.PRODUCE_CONSUME:
            return [self.producer(bootstrap, topic, records, scenario),
                    tools.consumer(bootstrap, topic, records, f"perf-{uuid.uuid4().hex[:8]}")]
        if work is Work.LATENCY:
            return [tools.end_to_end(bootstrap, topic, records, acks, size)]
        if work is Work.KCAT_PRODUCE:
            lines = self.scratch / f"lines-{records}-{size}.txt"
            if not lines.exists():
                perf_tools.record_lines(lines, records, size)
            return [perf_tools.kcat_producer(self.kcat, bootstrap, topic, acks, lines)]
        return [perf_tools.kcat_consumer(self.kcat, bootstrap, topic, records)]

    def read(self, scenario: Scenario, outputs: list[str], records: int,
             outcome: Outcome) -> None:
        """The tools' figures into ``outcome``: rates summed over concurrent clients (each
        tool's own rate, as Kafka's published multi-producer figures were made)."""
        work, figures = scenario.work, outcome.figures
        try:
            if work in (Work.PRODUCE, Work.FIXED_RATE):
                produced = [perf_tools.parse_producer(out) for out in outputs]
                figures[Measure.PRODUCE_RPS] = sum(p.records_per_s for p in produced)
                figures[Measure.PRODUCE_MBPS] = sum(p.mb_per_s for p in produced)
                figures[Measure.P50_MS] = max(p.p50_ms for p in produced)
                figures[Measure.P99_MS] = max(p.p99_ms for p in produced)
                outcome.records = sum(p.records for p in produced)
            elif work is Work.CONSUME:
                consumed = [perf_tools.parse_consumer(out) for out in outputs]
                self._check_count(consumed, records)
                figures[Measure.CONSUME_RPS] = sum(c.fetch_records_per_s for c in consumed)
                figures[Measure.CONSUME_MBPS] = sum(c.fetch_mb_per_s for c in consumed)
                outcome.records = sum(c.records for c in consumed)
            elif work is Work.PRODUCE_CONSUME:
                produced_one = perf_tools.parse_producer(outputs[0])
                consumed_one = perf_tools.parse_consumer(outputs[1])
                self._check_count([consumed_one], records)
                figures[Measure.PRODUCE_RPS] = produced_one.records_per_s
                figures[Measure.CONSUME_RPS] = consumed_one.fetch_records_per_s
                figures[Measure.P99_MS] = produced_one.p99_ms
                outcome.records = produced_one.records + consumed_one.records
            elif work is Work.LATENCY:
                latency = perf_tools.parse_end_to_end(outputs[0])
                figures[Measure.AVG_MS] = latency.avg_ms
                figures[Measure.P50_MS] = latency.p50_ms
                figures[Measure.P99_MS] = latency.p99_ms
                outcome.records = records
            else:
                if work is Work.KCAT_CONSUME and len(outputs[0]) != records:
                    raise BenchError(f"kcat printed {len(outputs[0])} records, not {records}")
                key = Measure.PRODUCE_RPS if work is Work.KCAT_PRODUCE else Measure.CONSUME_RPS
                figures[key] = records / outcome.seconds
                outcome.records = records
        except perf_tools.ToolOutputError as exc:
            raise BenchError(f"{scenario.name} on {outcome.target}: {exc}") from exc

    @staticmethod
    def _check_count(consumed: list[perf_tools.ConsumerFigures], records: int) -> None:
        short = [c.records for c in consumed if c.records < records]
        if short:
            raise BenchError(f"ConsumerPerformance read {short} records, not {records} "
                             "(it timed out)")


def run(args: argparse.Namespace, console: Console) -> tuple[dict[Target, str],
                                                          list[Outcome], dict[str, list[str]]]:
    """Every target started (and warmed up) first; then each scenario on one target right
    after another, so a change in the shared machine's load hits the scenario's figures for
    every target alike rather than one target's whole run; then the profile pass. The idle
    targets stay up meanwhile (their idle CPU is a small, equal tax; their CPU is not counted)."""
    kcat = shutil.which("kcat")
    if kcat is None and any(s.startswith("kcat") for s in args.scenarios):
        raise PeerStartError("kcat is not installed (apt-get install -y kcat; ci/setup.sh "
                             "installs it)")
    distribution = KafkaDistribution.find("3.9")
    scenarios = [s for s in SCENARIOS if s.name in args.scenarios]
    versions: dict[Target, str] = {}
    outcomes: list[Outcome] = []
    profiles: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-perf-") as tmp:
        scratch = Path(tmp)
        log4j = scratch / "tools-log4j.properties"
        log4j.write_text(perf_tools.QUIET_LOG4J)
        tools = perf_tools.Tools(find_java(), distribution.classpath, log4j)
        bench = Bench(tools, kcat or "kcat", scratch, args.records, console)
        with contextlib.ExitStack() as stack:
            started: list[Running] = []
            for target in args.targets:
                console.log(f"{target}: starting")
                running = start_target(target, scratch)
                stack.callback(running.stop)  # type: ignore[arg-type]
                versions[target] = running.version
                bench.warm_up(running, any(s.transactional for s in scenarios))
                started.append(running)
            for scenario in scenarios:
                rounds: dict[Target, list[Outcome]] = {r.target: [] for r in started}
                for number in range(1, args.rounds + 1):
                    for running in started:
                        outcome = bench.measure(running, scenario)
                        label = f" (round {number})" if args.rounds > 1 else ""
                        console.log(f"{running.target} {scenario.name}{label}: "
                                    f"{outcome.summary()}")
                        rounds[running.target].append(outcome)
                outcomes += [median_round(scenario, found) for found in rounds.values()]
        if Target.REFERENCE in args.targets and not args.no_profile:
            profiles = profile_reference(bench, console, args.profile)
    return versions, outcomes, profiles


def profile_path(scenario: Scenario) -> Path:
    """Where a profiled scenario's top functions go: ``PROFILED`` keep the names by work
    they always had, any other is named by itself."""
    name = scenario.work.value if scenario.name in PROFILED else scenario.name
    return RESULTS / f"perf-profile-reference-{name}.txt"


def profile_reference(bench: Bench, console: Console,
                      names: Sequence[str] = PROFILED) -> dict[str, list[str]]:
    """``names`` (``produce-1`` and ``consume-1`` unless ``--profile`` says otherwise), in
    order, on a standalone reference broker under cProfile (not part of the figures: a
    fourth start, after the measured ones); each scenario's top functions by own time go to
    ``profile_path``. Returns scenario → the file and its top lines."""
    written: dict[str, list[str]] = {}
    profiled = ProfiledReference(bench.scratch / "profiled")
    broker = profiled.start()
    try:
        assert broker.pid is not None
        running = Running(Target.REFERENCE, "standalone, cProfile", broker.bootstrap,
                          [broker.pid], 1, broker.stop, logs={broker.pid: broker.log_path})
        scenarios = [next(s for s in SCENARIOS if s.name == name) for name in names]
        # __consumer_offsets (and __transaction_state) are created here, not in the profile
        bench.warm_up(running, any(s.transactional for s in scenarios))
        for scenario in scenarios:
            name = scenario.name
            if scenario.work is Work.CONSUME:
                bench.source_topic(running, scenario)  # filled before the profile starts
            profiled.begin()
            outcome = bench.measure(running, scenario)
            profile = profiled.end()
            path = profile_path(scenario)
            top = write_summary(profile, path, (
                f"reference broker, standalone (1 node), {name}: {scenario.what}; "
                f"{scenario.records(bench.records):,} records per client; cProfile of the main "
                f"thread for exactly the scenario, sorted by own time (tottime). Under the "
                f"profiler: {outcome.summary()}"))
            written[name] = [str(path.relative_to(REPO_ROOT)), *top]
            console.log(f"profile of {name} written to {written[name][0]}")
    finally:
        profiled.stop()
    return written


def write_json(path: Path, args: argparse.Namespace, machine: dict[str, object],
               versions: dict[Target, str], outcomes: list[Outcome],
               profiles: dict[str, list[str]]) -> None:
    document: dict[str, object] = {
        "benchmark": "perf",
        "schema_version": SCHEMA_VERSION,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "load_average_1m_at_end": os.getloadavg()[0],
        "settings": {"records": args.records, "rounds": args.rounds,
                     "brokers_per_cluster": BROKERS,
                     "producer_props": perf_tools.PRODUCER_PROPS,
                     "targets": {str(t): v for t, v in versions.items()},
                     "scenarios": [asdict(s) for s in SCENARIOS if s.name in args.scenarios]},
        "goals": perf_report.GOALS,
        "results": [o.as_json() for o in outcomes],
        "reference_over_apache_kafka": perf_report.ratios(outcomes),
        "shapes": perf_report.shapes(outcomes),
        "profiles": profiles,
    }
    write_json_atomically(path, document)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    machine = machine_info()
    err = Console(stderr=True)
    try:
        versions, outcomes, profiles = run(args, err)
    except PeerStartError as exc:
        err.print("[red]a target did not start:[/]", end=" ")
        err.print(str(exc), markup=False, highlight=False)
        return 3
    except (BenchError, ClusterWaitTimeout, KafkaException, subprocess.TimeoutExpired) as exc:
        err.print("[red]measurement failed:[/]", end=" ")
        err.print(str(exc), markup=False, highlight=False)
        return 1
    except KeyboardInterrupt:
        err.print("interrupted; brokers and tools stopped")
        return 130
    write_json(args.output, args, machine, versions, outcomes, profiles)
    failed = [o for o in outcomes if o.failed]
    load = (f"load average {machine['load_average_1m_at_start']:.2f} at start, "
            f"{os.getloadavg()[0]:.2f} at end, {machine['usable_cpus']} CPUs")
    perf_report.print_report(versions, outcomes, args.records, load, args.markdown)
    err.print(f"results written to {args.output}", highlight=False)
    for outcome in failed:
        err.print(f"{outcome.scenario} on {outcome.target} failed: {outcome.failed}",
                  markup=False, highlight=False)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
