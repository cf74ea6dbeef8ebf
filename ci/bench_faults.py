"""Faults benchmark: what putting every link behind Toxiproxy costs, and how fast faults apply.

One run, this machine:

* start-up — ``ProxiedCluster.start()`` for ZooKeeper + ``--brokers`` brokers + the Toxiproxy
  server (a real ``toxiproxy-server`` if on PATH, else the built-in one) and one proxy per link,
  until every broker's Metadata lists every broker. Goal: < 5 s.
* apply / heal — ``NetworkFaults.isolate("broker-N")`` (heal first, then one ``timeout`` toxic
  per cut stream; it returns once Toxiproxy holds every toxic) and ``NetworkFaults.heal()``
  (every partition toxic removed), each timed ``--repeat`` times; the table shows medians.
  Goal: < 50 ms each.
* throughput — one confluent-kafka Producer sends ``--messages`` records of 100 bytes to
  partition 0 of a fresh topic with replication factor ``min(3, brokers)``, acks=all,
  linger.ms=5, no compression; after a warm-up record the clock runs from the first
  ``produce()`` to the end of ``flush()``. Measured on a plain local cluster ("direct") and on the
  proxied one, where client requests and the followers' fetches both cross a proxy.
  Goal: proxied ≥ 0.85 × direct.

Results: a rich table (``--markdown`` for the README) and ``bench-results/faults.json``.
Exit codes: 0 measured, 1 a measurement failed, 2 usage, 3 the cluster could not start.
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
from harness.cluster.process import PeerStartError
from harness.cluster.proxied import ProxiedCluster
from harness.nemesis.network import NetworkFaults

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = REPO_ROOT / "bench-results" / "faults.json"
RECORD_BYTES = 100
FLUSH_TIMEOUT_S = 300.0
GOALS = {"startup_s": 5.0, "apply_ms": 50.0, "heal_ms": 50.0, "throughput_ratio": 0.85}
PRODUCER_CONFIG = {
    "log_level": 0,
    "acks": "all",
    "enable.idempotence": False,
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "compression.type": "none",
}


class BenchError(RuntimeError):
    """A measurement could not be completed; its number would mean nothing."""


@dataclass(frozen=True)
class Results:
    startup_s: float
    apply_ms: list[float]
    heal_ms: list[float]
    cut_pairs: int
    direct_msgs_per_s: float
    proxied_msgs_per_s: float
    toxiproxy: str

    @property
    def throughput_ratio(self) -> float:
        return self.proxied_msgs_per_s / self.direct_msgs_per_s


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="ci/bench_faults.py",
        description="Start-up time of a proxied cluster, time to apply and heal a partition, "
        "and produce throughput through the proxies vs direct.",
    )
    parser.add_argument("--messages", type=int, default=200_000,
                        help="records per throughput measurement (default: %(default)s)")
    parser.add_argument("--brokers", type=int, default=3, help="cluster size (default: 3)")
    parser.add_argument("--repeat", type=int, default=10,
                        help="partitions applied and healed; the table shows medians "
                        "(default: %(default)s)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT,
                        help="JSON results (default: %(default)s)")
    parser.add_argument("--markdown", action="store_true",
                        help="print the table as Markdown (for the README)")
    args = parser.parse_args(argv)
    if args.messages < 1:
        parser.error(f"--messages must be >= 1, got {args.messages}")
    if args.brokers < 2:
        parser.error(f"--brokers must be >= 2 (a partition needs two sides), got {args.brokers}")
    if args.repeat < 1:
        parser.error(f"--repeat must be >= 1, got {args.repeat}")
    return args


def create_topic(bootstrap: str, replication: int) -> str:
    name = f"bench-faults-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(name, 1, replication)])[name].result(timeout=30)
    return name


def wait_until_replicated(cluster: LocalCluster, topic: str) -> None:
    everyone = set(cluster.brokers)
    cluster.wait_for(lambda: set((cluster.partition_state(topic, 0) or {}).get("isr", []))
                     == everyone, 60, f"{topic}-0's ISR to hold brokers {sorted(everyone)}")


def measure_produce(bootstrap: str, cluster: LocalCluster, replication: int,
                    records: int) -> float:
    """Records per second, acks=all, to partition 0 of a fresh fully replicated topic."""
    topic = create_topic(bootstrap, replication)
    wait_until_replicated(cluster, topic)
    payload = os.urandom(RECORD_BYTES)
    producer = Producer({**PRODUCER_CONFIG, "bootstrap.servers": bootstrap})
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
    return records / elapsed


def measure_partitions(faults: NetworkFaults, node: str,
                       repeat: int) -> tuple[list[float], list[float], int]:
    """Milliseconds to isolate ``node`` and to heal, ``repeat`` times each."""
    apply_ms: list[float] = []
    heal_ms: list[float] = []
    pairs: list[tuple[str, str]] = []
    for _ in range(repeat):
        started = time.perf_counter()
        pairs = faults.isolate(node)
        apply_ms.append((time.perf_counter() - started) * 1000)
        if len(faults.active()["partition"]) != len(pairs):
            raise BenchError(f"Toxiproxy does not hold the cuts isolating {node}")
        started = time.perf_counter()
        faults.heal()
        heal_ms.append((time.perf_counter() - started) * 1000)
        if faults.active()["partition"]:
            raise BenchError("partition toxics left after heal()")
    return apply_ms, heal_ms, len(pairs)


def run(args: argparse.Namespace, console: Console) -> Results:
    spec = ClusterSpec(brokers=args.brokers)
    replication = min(3, args.brokers)
    console.log(f"direct: starting ZooKeeper and {args.brokers} brokers")
    with LocalCluster(spec) as direct:
        console.log(f"direct: producing {args.messages:,} records")
        direct_rate = measure_produce(direct.bootstrap, direct, replication, args.messages)
    console.log(f"proxied: starting ZooKeeper, {args.brokers} brokers and the proxies")
    started = time.perf_counter()
    with ProxiedCluster(spec) as proxied:
        startup = time.perf_counter() - started
        toxiproxy = "built-in" if proxied.server_pid is not None else proxied.toxiproxy_url
        console.log(f"proxied: ready after {startup:.2f}s; producing {args.messages:,} records")
        proxied_rate = measure_produce(proxied.bootstrap, proxied.cluster, replication,
                                       args.messages)
        console.log(f"proxied: isolating broker-{args.brokers} and healing × {args.repeat}")
        apply_ms, heal_ms, cut = measure_partitions(NetworkFaults(proxied),
                                                    f"broker-{args.brokers}", args.repeat)
    return Results(startup_s=startup, apply_ms=apply_ms, heal_ms=heal_ms, cut_pairs=cut,
                   direct_msgs_per_s=direct_rate, proxied_msgs_per_s=proxied_rate,
                   toxiproxy=toxiproxy)


def _verdict(ok: bool) -> str:
    return "✓" if ok else "✗"


def report_rows(args: argparse.Namespace, results: Results) -> list[list[str]]:
    apply_ms, heal_ms = statistics.median(results.apply_ms), statistics.median(results.heal_ms)
    ratio = results.throughput_ratio
    return [
        [f"start: ZooKeeper + {args.brokers} brokers + proxies, all ready (goal < 5 s)",
         f"{results.startup_s:.2f} s {_verdict(results.startup_s < GOALS['startup_s'])}"],
        [f"apply: isolate broker-{args.brokers}, {results.cut_pairs} directed cuts "
         "(median; goal < 50 ms)",
         f"{apply_ms:.1f} ms {_verdict(apply_ms < GOALS['apply_ms'])}"],
        ["heal: every partition toxic removed (median; goal < 50 ms)",
         f"{heal_ms:.1f} ms {_verdict(heal_ms < GOALS['heal_ms'])}"],
        ["produce msg/s, direct (acks=all)", f"{results.direct_msgs_per_s:,.0f}"],
        ["produce msg/s, through the proxies (goal ≥ 0.85× direct)",
         f"{results.proxied_msgs_per_s:,.0f} ({ratio:.2f}×) "
         f"{_verdict(ratio >= GOALS['throughput_ratio'])}"],
    ]


def write_json(path: Path, args: argparse.Namespace, results: Results,
               machine: dict[str, object]) -> None:
    document = {
        "benchmark": "faults",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "settings": {
            "messages": args.messages,
            "record_bytes": RECORD_BYTES,
            "brokers": args.brokers,
            "repeat": args.repeat,
            "producer": PRODUCER_CONFIG,
            "toxiproxy": results.toxiproxy,
        },
        "goals": GOALS,
        "startup_s": results.startup_s,
        "median_ms": {"apply": statistics.median(results.apply_ms),
                      "heal": statistics.median(results.heal_ms)},
        "throughput_msgs_per_s": {"direct": results.direct_msgs_per_s,
                                  "proxied": results.proxied_msgs_per_s},
        "throughput_ratio": results.throughput_ratio,
        "runs": asdict(results),
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
        err.print("interrupted; brokers, ZooKeeper and proxies stopped")
        return 130
    write_json(args.output, args, results, machine)
    rows = report_rows(args, results)
    title = (f"Faults: {args.brokers} brokers, Toxiproxy {results.toxiproxy}; "
             f"{args.messages:,} × {RECORD_BYTES}-byte records; partitions × {args.repeat}")
    print_results(title, rows, args.markdown)
    err.print(f"results written to {args.output}", highlight=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
