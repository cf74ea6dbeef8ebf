"""Cluster benchmark: what replication costs, how long failures leave a partition unusable, and
how long a cluster takes to start — for the reference broker and Apache Kafka, side by side.

One run, this machine, the same confluent-kafka producer settings throughout, every measure
taken for each kind of ``--kinds`` (default all three: the project's reference broker, Apache
Kafka 3.9 in ZooKeeper mode, see :mod:`harness.cluster.apache_kafka`, and Apache Kafka 4.x as
a KRaft quorum of combined nodes, :mod:`harness.cluster.kraft`), and each figure shown with
the ratio reference / apache-kafka. The machine is shared and has few
cores, so the ratios are the figures to compare between runs; the absolute numbers move with
the load.

* start-up — ``LocalCluster.start()`` of ZooKeeper + ``--brokers`` brokers, from the call until
  every broker's own Metadata lists every broker (what ``start()`` waits for), ``--repeat``
  times in fresh run directories; best and median. Measured without proxies and with every
  link behind Toxiproxy (``ProxiedCluster.start()``, which also starts the Toxiproxy server
  ``find_toxiproxy_server`` picks and creates one proxy per link first). The starts of both
  kinds alternate, so a change in the machine's load hits both. Goal: Apache Kafka's cluster
  ready in < 15 s (its median, on both backends), in ZooKeeper mode and in KRaft mode (where
  ready also means every node registered with the quorum's active controller: the first
  Metadata lists only the brokers the controller has unfenced).
* throughput — one Producer sends ``--messages`` records of 100 bytes to partition 0 of a fresh
  topic, acks=all, linger.ms=5, batch.size=1,000,000, no compression, idempotence off; after one
  warm-up record (connections and metadata in place) the clock runs from the first
  ``produce()`` to the end of ``flush()``. Measured on one broker with replication factor 1 and
  on a local cluster of ``--brokers`` brokers in ZooKeeper mode with a replication factor of
  ``min(3, brokers)``: there acks=all waits until every in-sync follower has fetched the batch.
  The one broker is, for the reference kind, its standalone broker (no ZooKeeper); Apache Kafka
  3.9 cannot run without ZooKeeper in ZooKeeper mode, so for it a 1-broker ``LocalCluster``.
* leader unavailability — on a topic with one partition per broker, a partition led by a broker
  other than the controller is chosen (so the controller does not fail too), its leader gets
  SIGKILL, and from that instant a raw-protocol probe asks a live broker for the partition's
  leader and sends that leader one acks=all record, every 50 ms, until one is acknowledged. The
  window is kill → that acknowledgement.
  It is dominated by ``zookeeper.session.timeout.ms``: the controller only learns of the death
  when ZooKeeper expires the dead broker's session and its ``/brokers/ids`` znode goes. A
  probe, not a librdkafka producer, so the window is the cluster's: librdkafka re-queries a
  partition's leader on a 1 s timer, which adds up to ~2 s of its own on top.
* controller failover — the controller gets SIGKILL; the time is until ``/controller`` names
  another broker and ``/controller_epoch`` has grown by one. Same session-timeout caveat. On
  KRaft the controller is the quorum's leader, and the time is until another voter answers
  DescribeQuorum as leader at a higher epoch (Raft's election timeout, not a session).

Each failure is repeated ``--repeat`` times (the killed broker is restarted in between and the
table shows medians). Every cluster is stopped (``stop()`` in ``finally``) before the next one
starts. Results: a rich table (``--markdown`` for the README) and ``bench-results/cluster.json``.
Exit codes: 0 measured (a missed goal shows as FAIL in the table), 1 a measurement failed,
2 usage, 3 a cluster or the Toxiproxy server could not start.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from bench_common import machine_info, write_json_atomically
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.cluster.errors import PeerStartError
from harness.cluster.kinds import BrokerKind
from harness.cluster.local import LocalCluster
from harness.cluster.peers import ReferenceBroker
from harness.cluster.proxied import ProxiedCluster
from harness.cluster.registry import BROKER_KINDS
from harness.cluster.spec import ClusterSpec
from harness.net.ports import LOOPBACK
from harness.net.toxiproxy_process import ToxiproxyStartError
from harness.raw_client import RawClient
from harness.waiting import ClusterWaitTimeout
from harness.wire.records import build_batch

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = REPO_ROOT / "bench-results" / "cluster.json"
REFERENCE, APACHE_KAFKA, KRAFT = "reference", "apache-kafka", "apache-kafka-kraft"
KINDS = (REFERENCE, APACHE_KAFKA, KRAFT)
APACHE_KAFKAS = (APACHE_KAFKA, KRAFT)  # the kinds the ready goal is for
ONE_BROKER = {REFERENCE: "standalone reference broker, no ZooKeeper",
              APACHE_KAFKA: "1-broker LocalCluster with ZooKeeper",
              KRAFT: "1-node KRaft LocalCluster (its own controller)"}
LOCAL, PROXIED = "local", "proxied"
RECORD_BYTES = 100
PRODUCE, METADATA = 0, 3
PROBE_INTERVAL_S = 0.05
FLUSH_TIMEOUT_S = 300.0
RECOVERY_TIMEOUT_S = 120.0
GOALS = {
    "apache_kafka_ready_s": 15.0,     # Kafka's cluster ready in < 15 s (3.9 and 4.x KRaft)
    "replicated_throughput_ratio": 0.4,  # RF 3 msg/s ≥ 0.4 × one broker's
    "leader_window_over_session_s": 1.0,  # leader window ≤ session timeout + 1 s
}
PRODUCER_CONFIG = {
    "log.connection.close": False,
    "acks": "all",
    "enable.idempotence": False,
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "compression.type": "none",
}


class BenchError(RuntimeError):
    """A measurement could not be completed; its number would mean nothing."""


@dataclass(frozen=True)
class Failover:
    """One timed failure: which broker died and how long until the cluster served again."""

    kind: str  # "leader" or "controller"
    round: int
    killed: int
    seconds: float
    new_leader_or_controller: int | None


@dataclass
class KindResults:
    """Everything measured on one broker kind; filled in as the run goes (starts alternate
    between kinds, so a kind's figures do not arrive together)."""

    kind: str
    version: str
    standalone_msgs_per_s: float = 0.0
    cluster_msgs_per_s: float = 0.0
    failovers: list[Failover] = field(default_factory=list)
    startup_s: dict[str, list[float]] = field(default_factory=lambda: {LOCAL: [], PROXIED: []})

    def median_seconds(self, failure: str) -> float:
        return statistics.median(f.seconds for f in self.failovers if f.kind == failure)

    def startup(self, backend: str) -> tuple[float, float]:
        """Best and median start-up seconds on ``backend``."""
        return min(self.startup_s[backend]), statistics.median(self.startup_s[backend])


@dataclass
class Results:
    """One run: every kind's figures and which Toxiproxy server carried the proxied starts."""

    replication_factor: int
    kinds: dict[str, KindResults]
    toxiproxy_server: str = "?"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="ci/bench_cluster.py",
        description="For the reference broker and Apache Kafka side by side: produce "
        "throughput of a replicated local cluster vs one broker, leader unavailability after "
        "a SIGKILL, controller failover time, and start-up time of ZooKeeper + brokers "
        "(direct and behind Toxiproxy).",
    )
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help=f"broker kinds to measure, comma-separated, of {', '.join(KINDS)} "
                        "(default: %(default)s)")
    parser.add_argument("--messages", type=int, default=1_000_000,
                        help="records per throughput measurement (default: %(default)s)")
    parser.add_argument("--brokers", type=int, default=3, help="cluster size (default: 3)")
    parser.add_argument("--controllers", type=int, default=0,
                        help="dedicated controllers of the KRaft kind's cluster (Kafka's "
                        "production layout); 0: combined nodes (default: 0)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="failures of each kind and cluster starts per kind and backend; "
                        "the table shows medians (default: 3)")
    parser.add_argument("--session-timeout-ms", type=int, default=6000,
                        help="zookeeper.session.timeout.ms of the brokers (default: 6000)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT,
                        help="JSON results (default: %(default)s)")
    parser.add_argument("--startup-only", action="store_true",
                        help="measure the start-ups alone (the ready goal), not throughput "
                        "or failures")
    parser.add_argument("--markdown", action="store_true",
                        help="print the table as Markdown (for the README)")
    args = parser.parse_args(argv)
    args.kinds = list(dict.fromkeys(k.strip() for k in args.kinds.split(",") if k.strip()))
    unknown = sorted(set(args.kinds) - set(KINDS))
    if unknown or not args.kinds:
        parser.error(f"--kinds takes {', '.join(KINDS)}; got {unknown or 'none'}")
    if args.messages < 1:
        parser.error(f"--messages must be >= 1, got {args.messages}")
    if args.brokers < 2:
        parser.error(f"--brokers must be >= 2 (a failover needs a survivor), got {args.brokers}")
    if args.repeat < 1:
        parser.error(f"--repeat must be >= 1, got {args.repeat}")
    if args.controllers < 0:
        parser.error(f"--controllers must be >= 0, got {args.controllers}")
    if args.controllers and KRAFT not in args.kinds:
        parser.error(f"--controllers is for the {KRAFT} kind")
    if args.session_timeout_ms < 1:
        parser.error(f"--session-timeout-ms must be >= 1, got {args.session_timeout_ms}")
    return args


def create_topic(bootstrap: str, partitions: int, replication: int) -> str:
    name = f"bench-cluster-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 5})
    admin.create_topics([NewTopic(name, partitions, replication)])[name].result(timeout=30)
    return name


def measure_produce(bootstrap: str, topic: str, records: int) -> float:
    """Seconds from the first produce() to the end of flush(), acks=all, partition 0."""
    payload = os.urandom(RECORD_BYTES)
    producer = Producer({**PRODUCER_CONFIG, "bootstrap.servers": bootstrap})
    # Warm up: connect to the partition's leader and send one batch, so the clock measures
    # throughput rather than librdkafka's connection and metadata set-up (which costs up to a
    # second when the leader is not the bootstrap broker the metadata came from).
    producer.produce(topic, payload, partition=0)
    if producer.flush(30):
        raise BenchError(f"{topic}-0 did not accept a warm-up record")
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, payload, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    unsent = producer.flush(FLUSH_TIMEOUT_S)
    elapsed = time.perf_counter() - started
    if unsent:
        raise BenchError(f"{unsent} records still unacknowledged after {FLUSH_TIMEOUT_S:.0f}s")
    return elapsed


def probe_produce(cluster: LocalCluster, topic: str, partition: int) -> int | str:
    """One acks=all Produce of one record to whichever broker a live broker's Metadata names as
    the leader, over the raw protocol: 0 when acknowledged, else the error code or why not.

    The record carries the current time as its CreateTime, as a producer's would: a timestamp
    of 0 is 1970 to a broker, whose time-based retention may then delete the segment."""
    last = "no broker running"
    for broker_id in cluster.running_broker_ids():
        try:
            with RawClient(LOOPBACK, cluster.broker(broker_id).port, timeout=2) as raw:
                metadata = raw.request(METADATA, 12, {
                    "topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
                    "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False})
            partitions = {p.partition_index: p for p in metadata.topics[0].partitions}
            leader = partitions[partition].leader_id if partition in partitions else -1
            if leader < 0:
                return "no leader"
            address = next((b for b in metadata.brokers if b.node_id == leader), None)
            if address is None:
                return f"leader {leader} not among the brokers"
            batch = build_batch([(None, b"probe")], timestamp_ms=int(time.time() * 1000))
            with RawClient(address.host, address.port, timeout=5) as raw:
                response = raw.request(PRODUCE, 9, {"acks": -1, "timeout": 5000, "topic_data": [
                    {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
            return int(response.responses[0].partition_responses[0].error_code)
        except (OSError, ConnectionError) as exc:
            last = f"{type(exc).__name__}: {exc}"
            continue
    return last


def wait_until_replicated(cluster: LocalCluster, topic: str, partitions: int) -> None:
    """Every broker running and back in every ISR, so the next failure starts from a full set."""
    everyone = set(cluster.brokers)
    for partition in range(partitions):
        cluster.wait_for(
            lambda p=partition: set((cluster.partition_state(topic, p) or {}).get("isr", []))
            == everyone,
            RECOVERY_TIMEOUT_S, f"{topic}-{partition}'s ISR to hold brokers {sorted(everyone)}")


def measure_leader_kill(cluster: LocalCluster, topic: str, partitions: int,
                        round_number: int) -> Failover:
    """SIGKILL a non-controller partition leader; time until an acks=all produce succeeds."""
    controller = cluster.wait_for(cluster.controller_id, 30, "a controller")
    leaders = {p: cluster.leader(topic, p) for p in range(partitions)}
    partition = next((p for p, b in leaders.items() if b is not None and b != controller), None)
    if partition is None:
        raise BenchError(f"every partition of {topic} is led by the controller {controller} "
                         f"or leaderless: {leaders}")
    victim = leaders[partition]
    assert victim is not None
    if (error := probe_produce(cluster, topic, partition)) != 0:
        raise BenchError(f"{topic}-{partition} did not accept a record before the kill: {error}")
    killed_at = time.monotonic()
    cluster.kill(victim)
    while (error := probe_produce(cluster, topic, partition)) != 0:
        if time.monotonic() - killed_at > RECOVERY_TIMEOUT_S:
            raise BenchError(f"{topic}-{partition} accepted nothing for "
                             f"{RECOVERY_TIMEOUT_S:.0f}s after broker {victim} died: {error}")
        time.sleep(PROBE_INTERVAL_S)
    seconds = time.monotonic() - killed_at
    new_leader = cluster.leader(topic, partition)
    cluster.start_broker(victim)
    return Failover("leader", round_number, victim, seconds, new_leader)


def measure_controller_kill(cluster: LocalCluster, round_number: int) -> Failover:
    """SIGKILL the controller; time until another broker holds /controller at a higher epoch
    (ZooKeeper: epoch + 1; a KRaft election may take more than one round)."""
    controller = cluster.wait_for(cluster.controller_id, 30, "a controller")
    epoch = cluster.controller_epoch()
    assert epoch is not None
    killed_at = time.monotonic()
    cluster.kill(controller)

    def successor() -> int | None:
        current = cluster.controller_id()
        moved = current is not None and current != controller
        return current if moved and (cluster.controller_epoch() or 0) > epoch else None

    new_controller = cluster.wait_for(successor, RECOVERY_TIMEOUT_S,
                                      f"a controller other than {controller}", interval=0.02)
    seconds = time.monotonic() - killed_at
    cluster.start_broker(controller)
    return Failover("controller", round_number, controller, seconds, new_controller)


def measure_startup(spec: ClusterSpec, kind: BrokerKind, backend: str) -> tuple[float, str]:
    """Seconds ``start()`` takes on ``backend`` in a fresh temporary run directory, and which
    Toxiproxy server carried the links (empty for the local backend). ``start()`` returns once
    every broker's Metadata lists every broker, which is the readiness measured."""
    cluster = (LocalCluster(spec, kind=kind) if backend == LOCAL
               else ProxiedCluster(spec, kind=kind))
    try:
        started = time.perf_counter()
        cluster.start()
        seconds = time.perf_counter() - started
        server = (cluster.toxiproxy_server.describe() if isinstance(cluster, ProxiedCluster)
                  else "")
    finally:
        cluster.stop()
    return seconds, server


def measure_one_broker(spec: ClusterSpec, kind: BrokerKind, messages: int) -> float:
    """msg/s on one broker, RF 1: the reference kind's standalone broker (no ZooKeeper);
    Apache Kafka 3.9 needs ZooKeeper in ZooKeeper mode, so a 1-broker cluster for it, and
    KRaft a 1-node cluster (its own controller)."""
    if kind.name == REFERENCE:
        broker = ReferenceBroker()
        try:
            broker.start()
            topic = create_topic(broker.bootstrap, 1, 1)
            return messages / measure_produce(broker.bootstrap, topic, messages)
        finally:
            broker.stop()
    cluster = LocalCluster(ClusterSpec(brokers=1, zookeeper_session_timeout_ms=(
        spec.zookeeper_session_timeout_ms)), kind=kind)
    try:
        cluster.start()
        topic = create_topic(cluster.bootstrap, 1, 1)
        return messages / measure_produce(cluster.bootstrap, topic, messages)
    finally:
        cluster.stop()


def measure_cluster(args: argparse.Namespace, spec: ClusterSpec, kind: BrokerKind,
                    replication: int, console: Console) -> tuple[float, list[Failover]]:
    """Replicated msg/s, then ``--repeat`` rounds of leader and controller SIGKILL."""
    failovers: list[Failover] = []
    console.log(f"{kind.name}: starting {args.brokers} brokers")
    cluster = LocalCluster(spec, kind=kind)
    try:
        cluster.start()
        topic = create_topic(cluster.bootstrap, 1, replication)
        wait_until_replicated(cluster, topic, 1)
        console.log(f"{kind.name}: producing with replication factor {replication}")
        rate = args.messages / measure_produce(cluster.bootstrap, topic, args.messages)
        failover_topic = create_topic(cluster.bootstrap, args.brokers, replication)
        for round_number in range(1, args.repeat + 1):
            wait_until_replicated(cluster, failover_topic, args.brokers)
            leader = measure_leader_kill(cluster, failover_topic, args.brokers, round_number)
            console.log(f"{kind.name} round {round_number}: leader {leader.killed} killed, "
                        f"produce succeeded again after {leader.seconds:.2f}s")
            wait_until_replicated(cluster, failover_topic, args.brokers)
            controller = measure_controller_kill(cluster, round_number)
            console.log(f"{kind.name} round {round_number}: controller {controller.killed} "
                        f"killed, broker {controller.new_leader_or_controller} took over after "
                        f"{controller.seconds:.2f}s")
            failovers += [leader, controller]
    finally:
        cluster.stop()
    return rate, failovers


def run(args: argparse.Namespace, console: Console) -> Results:
    """Starts first, kinds and backends alternating so a change in the machine's load hits
    every column; then one broker's throughput per kind; then each kind's cluster."""
    base = ClusterSpec(brokers=args.brokers, zookeeper_session_timeout_ms=args.session_timeout_ms)
    # Dedicated controllers are a KRaft layout; the other kinds keep theirs.
    specs = {name: replace(base, controllers=args.controllers if name == KRAFT else 0)
             for name in args.kinds}
    kinds = {name: BROKER_KINDS[name]() for name in args.kinds}
    results = Results(replication_factor=min(3, args.brokers),
                      kinds={name: KindResults(name, kind.version())
                             for name, kind in kinds.items()})
    for round_number in range(1, args.repeat + 1):
        for name, kind in kinds.items():
            for backend in (LOCAL, PROXIED):
                seconds, server = measure_startup(specs[name], kind, backend)
                results.kinds[name].startup_s[backend].append(seconds)
                results.toxiproxy_server = server or results.toxiproxy_server
                console.log(f"start {round_number}: {name} {backend}"
                            f"{f' ({server})' if server else ''}: ready after {seconds:.2f}s")
    if args.startup_only:
        return results
    for name, kind in kinds.items():
        console.log(f"{name}: one broker, producing {args.messages:,} records")
        results.kinds[name].standalone_msgs_per_s = measure_one_broker(specs[name], kind,
                                                                       args.messages)
    for name, kind in kinds.items():
        rate, failovers = measure_cluster(args, specs[name], kind, results.replication_factor,
                                          console)
        results.kinds[name].cluster_msgs_per_s = rate
        results.kinds[name].failovers = failovers
    return results


def verdict(passed: dict[str, bool]) -> str:
    """PASS or FAIL, per kind when the kinds disagree."""
    if len(set(passed.values())) == 1:
        return "PASS" if next(iter(passed.values())) else "FAIL"
    return ", ".join(f"{name} {'PASS' if ok else 'FAIL'}" for name, ok in passed.items())


def ratio(reference: float, kafka: float) -> str:
    """reference / apache-kafka: above 1 is more msg/s, or more seconds, for the reference."""
    return f"{reference / kafka:.2f}×" if kafka else "—"


def report(args: argparse.Namespace, results: Results) -> tuple[list[str], list[list[str]]]:
    """Headers and rows: one column per kind, then reference / apache-kafka when both ran,
    then the goal."""
    measured = list(results.kinds.values())
    both = REFERENCE in results.kinds and APACHE_KAFKA in results.kinds
    headers = ["measure", *(f"{m.kind} {m.version}" if m.kind in APACHE_KAFKAS else m.kind
                            for m in measured)]
    headers += ["reference / apache-kafka"] if both else []
    headers.append("goal")
    session_s = args.session_timeout_ms / 1000
    leader_goal = session_s + GOALS["leader_window_over_session_s"]
    ready_goal = GOALS["apache_kafka_ready_s"]
    rf, brokers = results.replication_factor, args.brokers

    def row(label: str, cells: list[str], figures: list[tuple[float, float]] | None,
            goal: str) -> list[str]:
        """``figures``: (reference, apache-kafka) pairs for the ratio column."""
        ratios = [" / ".join(ratio(r, k) for r, k in figures or [])] if both else []
        return [label, *cells, *ratios, goal]

    def pair(get: Callable[[KindResults], float]) -> list[tuple[float, float]]:
        return [(get(results.kinds[REFERENCE]), get(results.kinds[APACHE_KAFKA]))] if both else []

    rows = [] if args.startup_only else [
        row("produce msg/s, 1 broker RF 1 (reference: standalone, no ZooKeeper; "
            "apache-kafka: 1-broker cluster + ZooKeeper; KRaft: 1 combined node)",
            [f"{m.standalone_msgs_per_s:,.0f}" for m in measured],
            pair(lambda m: m.standalone_msgs_per_s), ""),
        row(f"produce msg/s, {brokers} brokers RF {rf} (× 1 broker)",
            [f"{m.cluster_msgs_per_s:,.0f} ({m.cluster_msgs_per_s / m.standalone_msgs_per_s:.2f}×)"
             for m in measured],
            pair(lambda m: m.cluster_msgs_per_s),
            f"≥ {GOALS['replicated_throughput_ratio']}× 1 broker: " + verdict(
                {m.kind: m.cluster_msgs_per_s >= GOALS["replicated_throughput_ratio"]
                 * m.standalone_msgs_per_s for m in measured})),
        row("leader SIGKILL → acks=all produce succeeds (median)",
            [f"{m.median_seconds('leader'):.2f} s" for m in measured],
            pair(lambda m: m.median_seconds("leader")),
            f"≤ session + 1 s = {leader_goal:g} s: " + verdict(
                {m.kind: m.median_seconds("leader") <= leader_goal for m in measured})),
        row("controller SIGKILL → another controller at a higher epoch (median)",
            [f"{m.median_seconds('controller'):.2f} s" for m in measured],
            pair(lambda m: m.median_seconds("controller")), "(reported)"),
    ]
    for backend, how in ((LOCAL, "direct"),
                         (PROXIED, f"every link through Toxiproxy ({results.toxiproxy_server}), "
                          "its start included")):
        kafkas = {name: results.kinds[name] for name in APACHE_KAFKAS if name in results.kinds}
        goal = (f"Apache Kafka median < {ready_goal:g} s: " + verdict(
            {name: kafka.startup(backend)[1] < ready_goal for name, kafka in kafkas.items()})
            if kafkas else "")
        rows.append(row(
            f"start-up, {brokers} brokers (and ZooKeeper, but for KRaft) until every Metadata "
            f"lists all {brokers}, {how} (best / median)",
            [" / ".join(f"{s:.2f}" for s in m.startup(backend)) + " s" for m in measured],
            (list(zip(results.kinds[REFERENCE].startup(backend),
                      results.kinds[APACHE_KAFKA].startup(backend), strict=True))
             if both else None), goal))
    return headers, rows


def print_table(title: str, headers: list[str], rows: list[list[str]], markdown: bool) -> None:
    """Markdown for the README, else a rich table (bench_common's printer has one result
    column; this table has one per kind)."""
    if markdown:
        lines = [f"**{title}**", "", "| " + " | ".join(headers) + " |",
                 "|---|" + "---:|" * (len(headers) - 2) + "---|"]
        print("\n".join(lines + ["| " + " | ".join(cells) + " |" for cells in rows]))
        return
    table = Table(title=title)
    table.add_column(headers[0])
    for header in headers[1:-1]:
        table.add_column(header, justify="right")
    table.add_column(headers[-1])
    for cells in rows:
        table.add_row(*(escape(cell) for cell in cells))
    Console().print(table)


def write_json(path: Path, args: argparse.Namespace, results: Results,
               machine: dict[str, object]) -> None:
    both = REFERENCE in results.kinds and APACHE_KAFKA in results.kinds
    kinds: dict[str, object] = {}
    for name, m in results.kinds.items():
        kinds[name] = {
            "version": m.version,
            "one_broker": ONE_BROKER[name],
            **({} if args.startup_only else {
                "throughput_msgs_per_s": {"one_broker": m.standalone_msgs_per_s,
                                          "cluster": m.cluster_msgs_per_s},
                "median_seconds": {"leader_unavailability": m.median_seconds("leader"),
                                   "controller_failover": m.median_seconds("controller")}}),
            "startup_seconds": {backend: {"best": m.startup(backend)[0],
                                          "median": m.startup(backend)[1],
                                          "runs": m.startup_s[backend]}
                                for backend in (LOCAL, PROXIED)},
            "failovers": [asdict(f) for f in m.failovers],
        }
    document: dict[str, object] = {
        "benchmark": "cluster",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "load_average_1m_at_end": os.getloadavg()[0],
        "settings": {
            "kinds": args.kinds,
            "messages": args.messages,
            "record_bytes": RECORD_BYTES,
            "brokers": args.brokers,
            "controllers": args.controllers,
            "replication_factor": results.replication_factor,
            "repeat": args.repeat,
            "zookeeper_session_timeout_ms": args.session_timeout_ms,
            "startup_only": args.startup_only,
            "toxiproxy_server": results.toxiproxy_server,
            "producer": PRODUCER_CONFIG,
        },
        "goals": GOALS,
        "kinds": kinds,
    }
    if both and not args.startup_only:
        ref, kafka = results.kinds[REFERENCE], results.kinds[APACHE_KAFKA]
        document["reference_over_apache_kafka"] = {
            "one_broker_msgs_per_s": ref.standalone_msgs_per_s / kafka.standalone_msgs_per_s,
            "cluster_msgs_per_s": ref.cluster_msgs_per_s / kafka.cluster_msgs_per_s,
            "leader_unavailability": ref.median_seconds("leader") / kafka.median_seconds("leader"),
            "controller_failover": (ref.median_seconds("controller")
                                    / kafka.median_seconds("controller")),
            **{f"startup_{backend}_median": ref.startup(backend)[1] / kafka.startup(backend)[1]
               for backend in (LOCAL, PROXIED)},
        }
    document["apache_kafka_ready_goal_met"] = {
        name: {backend: results.kinds[name].startup(backend)[1] < GOALS["apache_kafka_ready_s"]
               for backend in (LOCAL, PROXIED)}
        for name in APACHE_KAFKAS if name in results.kinds}
    write_json_atomically(path, document)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    machine = machine_info()
    err = Console(stderr=True)
    try:
        results = run(args, err)
    except (PeerStartError, ToxiproxyStartError) as exc:
        err.print("[red]a cluster did not start:[/]", end=" ")
        err.print(str(exc), markup=False, highlight=False)
        return 3
    except (BenchError, ClusterWaitTimeout, KafkaException) as exc:
        err.print("[red]measurement failed:[/]", end=" ")
        err.print(str(exc), markup=False, highlight=False)
        return 1
    except KeyboardInterrupt:
        err.print("interrupted; brokers, ZooKeeper and proxies stopped")
        return 130
    write_json(args.output, args, results, machine)
    headers, rows = report(args, results)
    title = (f"Cluster: {args.messages:,} × {RECORD_BYTES}-byte records; failures and starts "
             f"× {args.repeat}, zookeeper.session.timeout.ms={args.session_timeout_ms}; "
             f"load average {machine['load_average_1m_at_start']:.1f} at start, "
             f"{os.getloadavg()[0]:.1f} at end")
    print_table(title, headers, rows, args.markdown)
    err.print(f"results written to {args.output}", highlight=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
