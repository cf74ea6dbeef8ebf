"""Kafka's own perf tools against the reference broker and Apache Kafka 3.9, side by side, and
a py-spy profile of the reference broker under the same load.

Why this exists: the reference broker's hot path (Produce and Fetch) is tuned against what Kafka's
``ProducerPerformance`` and ``ConsumerPerformance`` (the kafka-tools jar, run with ``java -cp``)
make it do; this script is the reproducible measurement behind each change. It is a development
tool for one scenario (one broker, one partition, 100-byte records); ``ci/bench_perf.py`` is the
full benchmark.

It starts one broker of each target (``--targets``) — the reference broker standalone, Apache
Kafka 3.9 as a 1-broker ``LocalCluster`` (ZooKeeper mode needs ZooKeeper) — and, after one
unmeasured produce and consume on each (JIT warm-up; ``--no-warmup`` measures cold brokers),
runs per round on fresh 1-partition topics ProducerPerformance with acks=1, ProducerPerformance
with acks=all (a second topic) and ConsumerPerformance over the acks=1 topic, each scenario on
one target right after the other so the shared machine's changing load hits both alike. Each
figure is the tool's own records/s (ConsumerPerformance: ``fetch.nMsg.sec``, which leaves out
the group join) and the broker's CPU-seconds (utime + stime of its process, from /proc) per
million records during that tool, next to the tool's own CPU-seconds (which side of the socket
is the bottleneck).

``--profile produce|consume`` then runs the tool once more against a fresh reference broker with
``py-spy record --nonblocking`` attached, and writes the functions with the most own time (and
their inclusive time) to ``bench-results/profile-reference-<tool>.txt``; the raw collapsed stacks
go next to it (``.folded``). Profiling slows the broker, so profiled runs are not measured.

Results: a table on stdout and ``bench-results/profile-broker.json``. Exit codes: 0 measured,
1 a tool failed, 2 usage, 3 a broker did not start.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path

from bench_common import machine_info, write_json_atomically
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.apache_kafka import KafkaDistribution
from harness.cluster.errors import PeerStartError
from harness.cluster.local import LocalCluster
from harness.cluster.peers import ReferenceBroker
from harness.cluster.registry import BROKER_KINDS
from harness.cluster.spec import ClusterSpec
from harness.cluster.zookeeper import find_java

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "bench-results"
TOOL_TIMEOUT_S = 600.0
CLK_TCK = os.sysconf("SC_CLK_TCK")
PRODUCER_LINE = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec")


class Kind(StrEnum):
    REFERENCE = "reference"
    APACHE_KAFKA = "apache-kafka"


@dataclass(frozen=True)
class Target:
    """A broker to measure; ``source`` set: the reference broker as of that directory's code
    (``--baseline``: an earlier commit, exported, measured in the same run as today's)."""

    kind: Kind
    source: Path | None = None
    revision: str = ""

    @property
    def value(self) -> str:
        return f"{self.kind.value}@{self.revision}" if self.revision else self.kind.value


class Tool(StrEnum):
    PRODUCE = "produce"
    CONSUME = "consume"


@dataclass(frozen=True)
class Measure:
    """One tool run against one broker."""

    target: str
    round: int
    scenario: str  # produce-acks1, produce-acksall, consume
    records: int
    records_per_s: float
    broker_cpu_s: float
    tool_cpu_s: float  # the perf tool's JVM: shows which side of the socket is the bottleneck

    @property
    def cpu_s_per_million(self) -> float:
        return self.broker_cpu_s * 1_000_000 / self.records


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ci/profile_broker.py",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--targets", default="reference,apache-kafka",
                        help="comma-separated subset of reference,apache-kafka ('' for none)")
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=1, help="rounds; the table shows medians")
    parser.add_argument("--baseline", metavar="REV",
                        help="also measure the reference broker as of git revision REV")
    parser.add_argument("--no-warmup", dest="warmup", action="store_false",
                        help="measure cold brokers (default: one unmeasured run first)")
    parser.add_argument("--profile", choices=[t.value for t in Tool], action="append",
                        default=[], help="also profile the reference broker under this tool")
    parser.add_argument("--profile-acks", default="1", help="acks of the profiled produce")
    parser.add_argument("--output", type=Path, default=RESULTS / "profile-broker.json")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.targets.split(",") if n.strip()]
    try:
        args.targets = [Target(Kind(n)) for n in names]
    except ValueError as exc:
        parser.error(f"--targets: {exc}")
    args.profile = [Tool(p) for p in args.profile]
    if args.baseline:
        args.targets.insert(1, Target(Kind.REFERENCE, export_revision(args.baseline),
                                      args.baseline))
    if args.records < 1 or args.repeat < 1:
        parser.error("--records and --repeat must be >= 1")
    return args


# --- brokers -------------------------------------------------------------------------------

def export_revision(revision: str) -> Path:
    """The broker and harness packages as of ``revision``, in a temporary directory (git
    archive: the checkout and its index are not touched)."""
    directory = Path(tempfile.mkdtemp(prefix="profile-baseline-"))
    archive = subprocess.run(["git", "-C", str(REPO_ROOT), "archive", revision,
                              "reference_broker", "harness"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(directory)], input=archive.stdout, check=True)
    return directory


@contextmanager
def running(target: Target) -> Iterator[tuple[str, int]]:
    """(bootstrap, broker pid) of a fresh one-broker target, stopped on exit."""
    if target.kind is Kind.REFERENCE:
        broker = ReferenceBroker()
        saved = os.environ.get("PYTHONPATH")
        if target.source is not None:  # the child imports the exported packages first
            os.environ["PYTHONPATH"] = str(target.source)
        try:
            broker.start()
        finally:
            if target.source is not None:
                if saved is None:
                    del os.environ["PYTHONPATH"]
                else:
                    os.environ["PYTHONPATH"] = saved
        try:
            assert broker.pid is not None
            yield broker.bootstrap, broker.pid
        finally:
            broker.stop()
        return
    cluster = LocalCluster(ClusterSpec(brokers=1), kind=BROKER_KINDS[target.kind.value]())
    cluster.start()
    try:
        pid = cluster.broker(1).pid
        assert pid is not None
        yield cluster.bootstrap, pid
    finally:
        cluster.stop()


def create_topic(bootstrap: str) -> str:
    topic = f"perf-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 5})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(
        timeout=30)
    return topic


def cpu_seconds(pid: int) -> float:
    """utime + stime of the whole process (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


# --- tools ---------------------------------------------------------------------------------

def tool_command(main_class: str, *args: str) -> list[str]:
    distribution = KafkaDistribution.find("3.9")
    return [find_java(), "-Xmx512m", "-cp", distribution.classpath, main_class, *args]


def produce_command(bootstrap: str, topic: str, records: int, size: int, acks: str) -> list[str]:
    return tool_command("org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
                        "--num-records", str(records), "--record-size", str(size),
                        "--throughput", "-1", "--producer-props",
                        f"bootstrap.servers={bootstrap}", f"acks={acks}")


def consume_command(bootstrap: str, topic: str, records: int) -> list[str]:
    return tool_command("org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server",
                        bootstrap, "--topic", topic, "--messages", str(records),
                        "--timeout", "60000")


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_tool(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{command[4]} exited {done.returncode}:\n{done.stdout[-2000:]}"
                           f"\n{done.stderr[-2000:]}")
    return done.stdout


def producer_rate(output: str, records: int) -> float:
    for line in reversed(output.splitlines()):
        match = PRODUCER_LINE.match(line.strip())
        if match:
            if int(match.group(1)) != records:
                raise RuntimeError(f"ProducerPerformance sent {match.group(1)} of {records}")
            return float(match.group(2))
    raise RuntimeError(f"no summary line in ProducerPerformance output:\n{output[-2000:]}")


def consumer_rate(output: str, records: int) -> float:
    """fetch.nMsg.sec of ConsumerPerformance's CSV line; checks it read every record."""
    lines = [line for line in output.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if line.startswith("start.time"):
            names = [n.strip() for n in line.split(",")]
            values = dict(zip(names, (v.strip() for v in lines[i + 1].split(",")), strict=False))
            if int(values["data.consumed.in.nMsg"]) < records:
                raise RuntimeError(f"ConsumerPerformance read {values['data.consumed.in.nMsg']}"
                                   f" of {records}")
            return float(values["fetch.nMsg.sec"])
    raise RuntimeError(f"no CSV in ConsumerPerformance output:\n{output[-2000:]}")


def measured(target: Target, round_: int, scenario: str, records: int, pid: int,
             command: list[str], rate_of) -> Measure:
    before, tool_before = cpu_seconds(pid), children_cpu_s()
    output = run_tool(command)
    cpu, tool_cpu = cpu_seconds(pid) - before, children_cpu_s() - tool_before
    return Measure(target.value, round_, scenario, records, rate_of(output, records), cpu,
                   tool_cpu)


SCENARIOS = ("produce-acks1", "produce-acksall", "consume")


def measure_all(args: argparse.Namespace) -> list[Measure]:
    """Every target runs at once (idle while not measured); each scenario is measured on one
    target right after the other, so a change in a shared machine's load hits them alike."""
    with ExitStack() as stack:
        brokers = {target: stack.enter_context(running(target)) for target in args.targets}
        if args.warmup:
            # A JVM broker is slow until its JIT has compiled the hot path; one unmeasured
            # produce and consume of the same size first, on a topic of its own.
            for bootstrap, _pid in brokers.values():
                warm = create_topic(bootstrap)
                run_tool(produce_command(bootstrap, warm, args.records, args.record_size, "1"))
                run_tool(consume_command(bootstrap, warm, args.records))
        out = []
        for round_ in range(args.repeat):
            topics = {target: (create_topic(b), create_topic(b))
                      for target, (b, _pid) in brokers.items()}
            for scenario in SCENARIOS:
                for target, (bootstrap, pid) in brokers.items():
                    acks1_topic, acksall_topic = topics[target]
                    if scenario == "consume":
                        command = consume_command(bootstrap, acks1_topic, args.records)
                    else:
                        acks = scenario.removeprefix("produce-acks")
                        command = produce_command(
                            bootstrap, acks1_topic if acks == "1" else acksall_topic,
                            args.records, args.record_size, acks)
                    out.append(measured(target, round_, scenario, args.records, pid, command,
                                        producer_rate if scenario != "consume"
                                        else consumer_rate))
        return out


# --- profiling -----------------------------------------------------------------------------

def profile(tool: Tool, args: argparse.Namespace) -> Path:
    """Run ``tool`` against a fresh reference broker under py-spy; returns the report path."""
    RESULTS.mkdir(exist_ok=True)
    folded = RESULTS / f"profile-reference-{tool.value}.folded"
    report = RESULTS / f"profile-reference-{tool.value}.txt"
    py_spy = Path(sys.executable).with_name("py-spy")
    if not py_spy.exists():
        raise RuntimeError(f"no {py_spy}: pip install py-spy (a dev extra)")
    with running(Target(Kind.REFERENCE)) as (bootstrap, pid):
        topic = create_topic(bootstrap)
        if tool is Tool.CONSUME:  # the log to read, written before the profiler attaches
            run_tool(produce_command(bootstrap, topic, args.records, args.record_size, "1"))
        spy = subprocess.Popen([str(py_spy), "record", "--pid", str(pid), "--nonblocking",
                                "--rate", "250", "--format", "raw", "--output", str(folded)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            time.sleep(1.0)  # py-spy attaches
            command = (produce_command(bootstrap, topic, args.records, args.record_size,
                                       args.profile_acks) if tool is Tool.PRODUCE
                       else consume_command(bootstrap, topic, args.records))
            started = time.perf_counter()
            output = run_tool(command)
            wall = time.perf_counter() - started
        finally:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=60)
    rate = (producer_rate(output, args.records) if tool is Tool.PRODUCE
            else consumer_rate(output, args.records))
    report.write_text(summarise(folded.read_text(), f"{tool.value} of {args.records} records, "
                                f"{args.record_size} B, tool wall {wall:.1f} s, "
                                f"{rate:,.0f} records/s under the profiler"))
    return report


def summarise(folded: str, title: str, top: int = 40) -> str:
    """Own and inclusive sample counts per function from py-spy's collapsed stacks."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in folded.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = stack.split(";")
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    idle = sum(n for f, n in own.items() if "select (selectors.py" in f or "poll (" in f)
    lines = [f"# reference broker under {title}", f"# {total} samples; in epoll (idle): "
             f"{idle} ({100 * idle / max(total, 1):.1f} %)", "",
             "## by own time", f"{'own %':>7} {'incl %':>7}  function"]
    for frame, n in own.most_common(top):
        lines.append(f"{100 * n / total:7.2f} {100 * inclusive[frame] / total:7.2f}  {frame}")
    lines += ["", "## by inclusive time", f"{'incl %':>7} {'own %':>7}  function"]
    for frame, n in inclusive.most_common(top):
        lines.append(f"{100 * n / total:7.2f} {100 * own[frame] / total:7.2f}  {frame}")
    return "\n".join(lines) + "\n"


# --- main ----------------------------------------------------------------------------------

def table(measures: list[Measure], targets: list[Target]) -> str:
    scenarios = list(dict.fromkeys(m.scenario for m in measures))
    lines = [f"{'scenario':<18}" + "".join(f"{t.value + ' rec/s':>26}{'CPU-s/M':>9}"
                                           f"{'tool CPU-s/M':>13}" for t in targets)
             + f"{'ratio':>8}"]  # the first target / Apache Kafka
    for scenario in scenarios:
        row = f"{scenario:<18}"
        rates = {}
        for target in targets:
            mine = [m for m in measures if m.scenario == scenario and m.target == target.value]
            rate = statistics.median(m.records_per_s for m in mine)
            cpu = statistics.median(m.cpu_s_per_million for m in mine)
            tool = statistics.median(m.tool_cpu_s * 1e6 / m.records for m in mine)
            rates[target] = rate
            row += f"{rate:>26,.0f}{cpu:>9.2f}{tool:>13.2f}"
        if targets[-1].kind is Kind.APACHE_KAFKA and len(targets) > 1:
            row += f"{rates[targets[0]] / rates[targets[-1]]:>8.2f}"
        lines.append(row)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.targets:
            report_measures(measure_all(args), args)
        for tool in args.profile:
            print(f"profile: {profile(tool, args).relative_to(REPO_ROOT)}")
    except PeerStartError as exc:
        print(f"a broker did not start: {exc}", file=sys.stderr)
        return 3
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"a tool failed: {exc}", file=sys.stderr)
        return 1
    finally:
        for target in args.targets:
            if target.source is not None:
                shutil.rmtree(target.source, ignore_errors=True)
    return 0


def report_measures(measures: list[Measure], args: argparse.Namespace) -> None:
    """The table and the JSON, written before any profiling starts."""
    print(f"load: {os.getloadavg()}")
    print(table(measures, args.targets), flush=True)
    write_json_atomically(args.output, {
        "machine": machine_info(), "records": args.records, "record_size": args.record_size,
        "load_average": os.getloadavg(),
        "measures": [asdict(m) | {"cpu_s_per_million": m.cpu_s_per_million}
                     for m in measures]})


if __name__ == "__main__":
    sys.exit(main())
