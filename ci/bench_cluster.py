"""Cluster benchmark: what replication costs, and how long failures leave a partition unusable.

One run, this machine, the same confluent-kafka producer settings throughout:

* throughput — one Producer sends ``--messages`` records of 100 bytes to partition 0 of a fresh
  topic, acks=all, linger.ms=5, batch.size=1,000,000, no compression, idempotence off; after one
  warm-up record (connections and metadata in place) the clock runs from the first
  ``produce()`` to the end of ``flush()``. Measured on a standalone reference
  broker (no ZooKeeper, replication factor 1) and on a local cluster of ``--brokers`` brokers in
  ZooKeeper mode with a replication factor of ``min(3, brokers)``: there acks=all waits until
  every in-sync follower has fetched the batch.
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
  another broker and ``/controller_epoch`` has grown by one. Same session-timeout caveat.

Each failure is repeated ``--repeat`` times (the killed broker is restarted in between and the
table shows medians). Results: a rich table (``--markdown`` for the README) and
``bench-results/cluster.json``. Exit codes: 0 measured, 1 a measurement failed, 2 usage,
3 the cluster could not start.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from bench_common import machine_info, print_results, write_json_atomically
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console

from harness.cluster.local import ClusterSpec, ClusterWaitTimeout, LocalCluster
from harness.cluster.peers import PeerStartError, ReferenceBroker
from harness.net.ports import LOOPBACK
from harness.raw_client import RawClient
from harness.wire.records import build_batch

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = REPO_ROOT / "bench-results" / "cluster.json"
RECORD_BYTES = 100
PRODUCE, METADATA = 0, 3
PROBE_INTERVAL_S = 0.05
FLUSH_TIMEOUT_S = 300.0
RECOVERY_TIMEOUT_S = 120.0
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


@dataclass(frozen=True)
class Results:
    standalone_msgs_per_s: float
    cluster_msgs_per_s: float
    replication_factor: int
    failovers: list[Failover]

    def median_seconds(self, kind: str) -> float:
        return statistics.median(f.seconds for f in self.failovers if f.kind == kind)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="ci/bench_cluster.py",
        description="Produce throughput of a replicated local cluster vs one standalone broker, "
        "leader unavailability after a SIGKILL, and controller failover time.",
    )
    parser.add_argument("--messages", type=int, default=1_000_000,
                        help="records per throughput measurement (default: %(default)s)")
    parser.add_argument("--brokers", type=int, default=3, help="cluster size (default: 3)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="failures of each kind; the table shows medians (default: 3)")
    parser.add_argument("--session-timeout-ms", type=int, default=6000,
                        help="zookeeper.session.timeout.ms of the brokers (default: 6000)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT,
                        help="JSON results (default: %(default)s)")
    parser.add_argument("--markdown", action="store_true",
                        help="print the table as Markdown (for the README)")
    args = parser.parse_args(argv)
    if args.messages < 1:
        parser.error(f"--messages must be >= 1, got {args.messages}")
    if args.brokers < 2:
        parser.error(f"--brokers must be >= 2 (a failover needs a survivor), got {args.brokers}")
    if args.repeat < 1:
        parser.error(f"--repeat must be >= 1, got {args.repeat}")
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
    the leader, over the raw protocol: 0 when acknowledged, else the error code or why not."""
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
            with RawClient(address.host, address.port, timeout=5) as raw:
                response = raw.request(PRODUCE, 9, {"acks": -1, "timeout": 5000, "topic_data": [
                    {"name": topic, "partition_data": [
                        {"index": partition, "records": build_batch([(None, b"probe")])}]}]})
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
    if probe_produce(cluster, topic, partition) != 0:
        raise BenchError(f"{topic}-{partition} did not accept a record before the kill")
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
    """SIGKILL the controller; time until another broker holds /controller at epoch + 1."""
    controller = cluster.wait_for(cluster.controller_id, 30, "a controller")
    epoch = cluster.controller_epoch()
    assert epoch is not None
    killed_at = time.monotonic()
    cluster.kill(controller)

    def successor() -> int | None:
        current = cluster.controller_id()
        moved = current is not None and current != controller
        return current if moved and (cluster.controller_epoch() or 0) >= epoch + 1 else None

    new_controller = cluster.wait_for(successor, RECOVERY_TIMEOUT_S,
                                      f"a controller other than {controller}", interval=0.02)
    seconds = time.monotonic() - killed_at
    cluster.start_broker(controller)
    return Failover("controller", round_number, controller, seconds, new_controller)


def run(args: argparse.Namespace, console: Console) -> Results:
    with ReferenceBroker() as standalone:
        console.log("standalone broker: producing")
        topic = create_topic(standalone.bootstrap, 1, 1)
        standalone_seconds = measure_produce(standalone.bootstrap, topic, args.messages)
    replication = min(3, args.brokers)
    spec = ClusterSpec(brokers=args.brokers, zookeeper_session_timeout_ms=args.session_timeout_ms)
    failovers: list[Failover] = []
    console.log(f"starting ZooKeeper and {args.brokers} brokers")
    with LocalCluster(spec) as cluster:
        topic = create_topic(cluster.bootstrap, 1, replication)
        wait_until_replicated(cluster, topic, 1)
        console.log(f"cluster: producing with replication factor {replication}")
        cluster_seconds = measure_produce(cluster.bootstrap, topic, args.messages)
        failover_topic = create_topic(cluster.bootstrap, args.brokers, replication)
        for round_number in range(1, args.repeat + 1):
            wait_until_replicated(cluster, failover_topic, args.brokers)
            leader = measure_leader_kill(cluster, failover_topic, args.brokers, round_number)
            console.log(f"round {round_number}: leader {leader.killed} killed, "
                        f"produce succeeded again after {leader.seconds:.2f}s")
            wait_until_replicated(cluster, failover_topic, args.brokers)
            controller = measure_controller_kill(cluster, round_number)
            console.log(f"round {round_number}: controller {controller.killed} killed, "
                        f"broker {controller.new_leader_or_controller} took over after "
                        f"{controller.seconds:.2f}s")
            failovers += [leader, controller]
    return Results(
        standalone_msgs_per_s=args.messages / standalone_seconds,
        cluster_msgs_per_s=args.messages / cluster_seconds,
        replication_factor=replication,
        failovers=failovers,
    )


def report_rows(args: argparse.Namespace, results: Results) -> list[list[str]]:
    single, replicated = results.standalone_msgs_per_s, results.cluster_msgs_per_s
    return [
        ["produce msg/s, standalone broker (RF 1)", f"{single:,.0f}"],
        [f"produce msg/s, {args.brokers} brokers RF {results.replication_factor}",
         f"{replicated:,.0f} ({replicated / single:.2f}×)"],
        ["leader SIGKILL → acks=all produce succeeds (median)",
         f"{results.median_seconds('leader'):.2f} s"],
        ["controller SIGKILL → new /controller at epoch+1 (median)",
         f"{results.median_seconds('controller'):.2f} s"],
    ]


def write_json(path: Path, args: argparse.Namespace, results: Results,
               machine: dict[str, object]) -> None:
    document = {
        "benchmark": "cluster",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "settings": {
            "messages": args.messages,
            "record_bytes": RECORD_BYTES,
            "brokers": args.brokers,
            "replication_factor": results.replication_factor,
            "repeat": args.repeat,
            "zookeeper_session_timeout_ms": args.session_timeout_ms,
            "producer": PRODUCER_CONFIG,
        },
        "throughput_msgs_per_s": {
            "standalone": results.standalone_msgs_per_s,
            "cluster": results.cluster_msgs_per_s,
        },
        "median_seconds": {
            "leader_unavailability": results.median_seconds("leader"),
            "controller_failover": results.median_seconds("controller"),
        },
        "failovers": [asdict(f) for f in results.failovers],
    }
    write_json_atomically(path, document)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    machine = machine_info()
    err = Console(stderr=True)
    try:
        results = run(args, err)
    except PeerStartError as exc:
        err.print("[red]the cluster did not start:[/]", end=" ")
        err.print(str(exc), markup=False, highlight=False)
        return 3
    except (BenchError, ClusterWaitTimeout, KafkaException) as exc:
        err.print("[red]measurement failed:[/]", end=" ")
        err.print(str(exc), markup=False, highlight=False)
        return 1
    except KeyboardInterrupt:
        err.print("interrupted; brokers and ZooKeeper stopped")
        return 130
    write_json(args.output, args, results, machine)
    rows = report_rows(args, results)
    title = (f"Cluster: {args.messages:,} × {RECORD_BYTES}-byte records; "
             f"failures × {args.repeat}, zookeeper.session.timeout.ms={args.session_timeout_ms}")
    print_results(title, rows, args.markdown)
    err.print(f"results written to {args.output}", highlight=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
