"""Faults benchmark: what putting every link behind Toxiproxy costs, and how fast faults apply,
on the real Toxiproxy server and on the built-in one, in one run.

One run, this machine:

* direct — one confluent-kafka Producer sends ``--messages`` records of 100 bytes to partition 0
  of a fresh topic with replication factor ``min(3, brokers)``, acks=all, linger.ms=5, no
  compression, on a plain local cluster; after a warm-up record the clock runs from the first
  ``produce()`` to the end of ``flush()``; ``--rounds`` times, each on a fresh topic, and the
  median counts (a 2-core machine shared with other work swings a single measurement by 2×).
* then for each server of ``--servers`` (default: the real ``toxiproxy-server`` that
  ``ci/setup.sh`` builds, then the built-in ``python -m harness.net.toxiproxy_server``), in turn:

  * start-up — the Toxiproxy server, then ``ProxiedCluster.start()`` for ZooKeeper +
    ``--brokers`` brokers and one proxy per link on it, until every broker's Metadata lists
    every broker. Goal: < 5 s.
  * throughput — as direct, through the proxies: client requests and the followers' fetches
    both cross one. Goal: median ≥ 0.85 × direct's median.
  * apply / heal — ``NetworkFaults.isolate("broker-N")`` (heal first, then one ``timeout``
    toxic per cut stream; it returns once Toxiproxy holds every toxic) and
    ``NetworkFaults.heal()`` (every partition toxic removed), each timed ``--repeat`` times;
    the table shows medians. Goal: < 50 ms each.

The server is started here (exactly as ``ProxiedCluster`` would start it) and handed to the
cluster as its Toxiproxy URL, so both servers are measured the same way whatever
``find_toxiproxy_server`` would pick. Results: a rich table (``--markdown`` for the README) and
``bench-results/faults.json``. Exit codes: 0 measured, 1 a measurement failed, 2 usage, 3 the
cluster or a Toxiproxy server could not start (the real one missing: run ci/fetch_vendor.sh).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from bench_common import machine_info, print_results, write_json_atomically
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console

from harness.cluster.local import ClusterSpec, LocalCluster
from harness.cluster.process import PeerStartError
from harness.cluster.proxied import ProxiedCluster
from harness.cluster.proxy_faults import NetworkFaults
from harness.net.toxiproxy_process import (
    ToxiproxyProcess,
    ToxiproxyStartError,
    find_toxiproxy_server,
    missing_real_server_message,
)
from harness.waiting import ClusterWaitTimeout

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = REPO_ROOT / "bench-results" / "faults.json"
RECORD_BYTES = 100
FLUSH_TIMEOUT_S = 300.0
SERVERS = ("real", "builtin")
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
class ServerResults:
    """Everything measured on one Toxiproxy server."""

    server: str
    """What the server is, e.g. ``real v2.12.0`` or ``built-in``."""
    startup_s: float
    apply_ms: list[float]
    heal_ms: list[float]
    cut_pairs: int
    rounds_msgs_per_s: list[float]

    @property
    def msgs_per_s(self) -> float:
        return statistics.median(self.rounds_msgs_per_s)


@dataclass(frozen=True)
class Results:
    direct_rounds_msgs_per_s: list[float]
    servers: dict[str, ServerResults]

    @property
    def direct_msgs_per_s(self) -> float:
        return statistics.median(self.direct_rounds_msgs_per_s)

    def ratio(self, server: str) -> float:
        return self.servers[server].msgs_per_s / self.direct_msgs_per_s


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="ci/bench_faults.py",
        description="Start-up time of a proxied cluster, time to apply and heal a partition, "
        "and produce throughput through the proxies vs direct, on the real Toxiproxy server "
        "and on the built-in one.",
    )
    parser.add_argument("--messages", type=int, default=200_000,
                        help="records per throughput measurement (default: %(default)s)")
    parser.add_argument("--brokers", type=int, default=3, help="cluster size (default: 3)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="throughput measurements per cluster; the median counts "
                        "(default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=10,
                        help="partitions applied and healed; the table shows medians "
                        "(default: %(default)s)")
    parser.add_argument("--servers", default=",".join(SERVERS),
                        help="Toxiproxy servers to measure, comma-separated, of "
                        f"{', '.join(SERVERS)} (default: %(default)s)")
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
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    args.servers = [name.strip() for name in args.servers.split(",") if name.strip()]
    unknown = sorted(set(args.servers) - set(SERVERS))
    if unknown or not args.servers:
        parser.error(f"--servers takes {', '.join(SERVERS)}; got {unknown or 'none'}")
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


def server_binary(name: str) -> Path | None:
    """The executable of server ``name``: None for the built-in one."""
    if name == "builtin":
        return None
    binary = find_toxiproxy_server()
    if binary is None:
        raise ToxiproxyStartError(missing_real_server_message())
    return binary


def measure_server(args: argparse.Namespace, spec: ClusterSpec, name: str,
                   console: Console) -> ServerResults:
    """Start-up, throughput, apply and heal on one Toxiproxy server."""
    replication = min(3, args.brokers)
    binary = server_binary(name)
    with tempfile.TemporaryDirectory(prefix="bench-faults-toxiproxy-") as server_dir:
        server = ToxiproxyProcess(Path(server_dir), binary)
        console.log(f"{name}: starting Toxiproxy, ZooKeeper, {args.brokers} brokers, proxies")
        started = time.perf_counter()
        try:
            url = server.start()
            with ProxiedCluster(spec, toxiproxy_url=url) as proxied:
                startup = time.perf_counter() - started
                described = server.info.describe()
                console.log(f"{described}: ready after {startup:.2f}s; "
                            f"producing {args.messages:,} records × {args.rounds}")
                rates = [measure_produce(proxied.bootstrap, proxied.cluster, replication,
                                         args.messages) for _ in range(args.rounds)]
                console.log(f"{described}: isolating broker-{args.brokers} and healing "
                            f"× {args.repeat}")
                apply_ms, heal_ms, cut = measure_partitions(
                    NetworkFaults(proxied), f"broker-{args.brokers}", args.repeat)
        finally:
            server.stop()
    return ServerResults(server=described, startup_s=startup, apply_ms=apply_ms,
                         heal_ms=heal_ms, cut_pairs=cut, rounds_msgs_per_s=rates)


def run(args: argparse.Namespace, console: Console) -> Results:
    spec = ClusterSpec(brokers=args.brokers)
    for name in args.servers:
        server_binary(name)  # a missing real server fails before anything is measured
    console.log(f"direct: starting ZooKeeper and {args.brokers} brokers")
    with LocalCluster(spec) as direct:
        console.log(f"direct: producing {args.messages:,} records × {args.rounds}")
        direct_rates = [measure_produce(direct.bootstrap, direct, min(3, args.brokers),
                                        args.messages) for _ in range(args.rounds)]
    servers = {name: measure_server(args, spec, name, console) for name in args.servers}
    return Results(direct_rounds_msgs_per_s=direct_rates, servers=servers)


def _verdict(ok: bool) -> str:
    return "✓" if ok else "✗"


def report_rows(args: argparse.Namespace, results: Results) -> list[list[str]]:
    """One row per measure, one column per server."""
    names = list(results.servers)
    measured = [results.servers[name] for name in names]
    cut = measured[0].cut_pairs
    rows = [
        [f"start: Toxiproxy + ZooKeeper + {args.brokers} brokers + proxies, all ready "
         "(goal < 5 s)",
         *(f"{m.startup_s:.2f} s {_verdict(m.startup_s < GOALS['startup_s'])}"
           for m in measured)],
        [f"apply: isolate broker-{args.brokers}, {cut} directed cuts (median; goal < 50 ms)",
         *(f"{ms:.1f} ms {_verdict(ms < GOALS['apply_ms'])}"
           for ms in (statistics.median(m.apply_ms) for m in measured))],
        ["heal: every partition toxic removed (median; goal < 50 ms)",
         *(f"{ms:.1f} ms {_verdict(ms < GOALS['heal_ms'])}"
           for ms in (statistics.median(m.heal_ms) for m in measured))],
        [f"produce msg/s through the proxies (median of {args.rounds}; goal ≥ 0.85× direct)",
         *(f"{results.servers[name].msgs_per_s:,.0f} ({results.ratio(name):.2f}×) "
           f"{_verdict(results.ratio(name) >= GOALS['throughput_ratio'])}" for name in names)],
        [f"produce msg/s direct, no proxies (acks=all; median of {args.rounds}; the same "
         "measurement for both)",
         *([f"{results.direct_msgs_per_s:,.0f}"] * len(names))],
    ]
    return rows


def write_json(path: Path, args: argparse.Namespace, results: Results,
               machine: dict[str, object]) -> None:
    document = {
        "benchmark": "faults",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "load_average_1m_at_end": os.getloadavg()[0],
        "settings": {
            "messages": args.messages,
            "record_bytes": RECORD_BYTES,
            "brokers": args.brokers,
            "repeat": args.repeat,
            "rounds": args.rounds,
            "producer": PRODUCER_CONFIG,
            "servers": {name: m.server for name, m in results.servers.items()},
        },
        "goals": GOALS,
        "direct_rounds_msgs_per_s": results.direct_rounds_msgs_per_s,
        "throughput_msgs_per_s": {"direct": results.direct_msgs_per_s,
                                  **{name: m.msgs_per_s for name, m in results.servers.items()}},
        "servers": {
            name: {
                "server": m.server,
                "startup_s": m.startup_s,
                "median_ms": {"apply": statistics.median(m.apply_ms),
                              "heal": statistics.median(m.heal_ms)},
                "throughput_ratio": results.ratio(name),
                "runs": asdict(m),
            }
            for name, m in results.servers.items()
        },
    }
    write_json_atomically(path, document)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    machine = machine_info()
    err = Console(stderr=True)
    try:
        results = run(args, err)
    except (PeerStartError, ToxiproxyStartError) as exc:
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
    title = (f"Faults: {args.brokers} brokers; {args.messages:,} × {RECORD_BYTES}-byte records; "
             f"partitions × {args.repeat}; load average {machine['load_average_1m_at_start']:.1f}"
             " at start")
    print_results(title, rows, args.markdown,
                  headers=["measure", *(m.server for m in results.servers.values())])
    err.print(f"results written to {args.output}", highlight=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
