"""Faults benchmark: what chaos costs, in one run on this machine — starting a cluster of each
broker kind, applying and healing a partition on each network mechanism, and producing through
the proxies rather than directly.

Why one run: the machine is 2 cores shared with other work, so figures from different runs
swing with the load; ratios are only meaningful side by side.

* start-up, per broker kind (``--kinds``, default the reference broker and Apache Kafka) —
  ``LocalCluster.start()`` for ZooKeeper + ``--brokers`` brokers, no proxies, until every
  broker's Metadata lists every broker; ``--startups`` fresh clusters each, median shown.
* direct throughput — one confluent-kafka Producer sends ``--messages`` records of 100 bytes to
  partition 0 of a fresh topic with replication factor ``min(3, brokers)``, acks=all,
  linger.ms=5, no compression, on a plain reference cluster; after a warm-up record the clock
  runs from the first ``produce()`` to the end of ``flush()``; ``--rounds`` times, each on a
  fresh topic, the median counts.
* then for each network mechanism of ``--mechanisms``:

  * ``real`` / ``builtin`` — the real ``toxiproxy-server`` that ``ci/setup.sh`` builds, or the
    built-in ``python -m harness.net.toxiproxy_server``: start-up of the server +
    ``ProxiedCluster.start()`` (ZooKeeper, brokers, one proxy per link), throughput as direct
    through the proxies (client requests and the followers' fetches both cross one), and
    apply / heal — ``NetworkFaults.isolate("broker-N")`` (returns once Toxiproxy holds every
    toxic) and ``heal()``, ``--repeat`` times each.
  * ``kernel`` — :class:`~harness.cluster.netns_cluster.NetnsCluster` (every node in a network
    namespace on a private bridge; root only): start-up, and apply / heal of the same
    isolation as iptables DROP rules (``KernelFaults``: one ``iptables-restore`` per node,
    returning once every node's rules are swapped). Nothing to measure for throughput: no
    proxy sits on the path.

Goals: proxied start-up < 5 s, apply and heal < 50 ms, throughput through either proxy
≥ 0.85 × direct. The server is started here (exactly as ``ProxiedCluster`` would start it) and
handed to the cluster as its Toxiproxy URL, so both servers are measured the same way whatever
``find_toxiproxy_server`` would pick. Results: rich tables (``--markdown`` for the docs) and
``bench-results/faults.json`` (``schema_version`` 2). Exit codes: 0 measured, 1 a measurement
failed, 2 usage, 3 a cluster or a Toxiproxy server could not start (the real one missing: run
ci/fetch_vendor.sh; the kernel mechanism needs root).
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
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path

from bench_common import machine_info, print_results, write_json_atomically
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console

from harness.cluster.errors import PeerStartError
from harness.cluster.factory import Faults
from harness.cluster.local import LocalCluster
from harness.cluster.netns_cluster import KernelFaults, NetnsCluster
from harness.cluster.options import ClusterTarget
from harness.cluster.proxied import ProxiedCluster
from harness.cluster.proxy_faults import NetworkFaults
from harness.cluster.registry import BROKER_KINDS
from harness.cluster.spec import ClusterSpec
from harness.net.netns import NetnsError, NetnsUnavailable
from harness.net.toxiproxy_process import (
    ToxiproxyProcess,
    ToxiproxyStartError,
    find_toxiproxy_server,
    missing_real_server_message,
)
from harness.waiting import ClusterWaitTimeout

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = REPO_ROOT / "bench-results" / "faults.json"
SCHEMA_VERSION = 2
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


class Mechanism(StrEnum):
    """A way of cutting links: a Toxiproxy server in user space, or the kernel's iptables."""

    REAL = "real"
    BUILTIN = "builtin"
    KERNEL = "kernel"

    @property
    def proxied(self) -> bool:
        return self is not Mechanism.KERNEL

    @property
    def title(self) -> str:
        return {Mechanism.REAL: "real Toxiproxy", Mechanism.BUILTIN: "built-in proxy",
                Mechanism.KERNEL: "iptables (netns)"}[self]


class BenchError(RuntimeError):
    """A measurement could not be completed; its number would mean nothing."""


@dataclass(frozen=True)
class MechanismResults:
    """Everything measured on one network mechanism."""

    mechanism: Mechanism
    described: str
    """What cuts the links, e.g. ``real v2.12.0``, ``built-in``, ``iptables v1.8.9``."""
    startup_s: float
    apply_ms: list[float]
    heal_ms: list[float]
    cut_pairs: int
    rounds_msgs_per_s: list[float] = field(default_factory=list)
    """Empty for the kernel mechanism: nothing sits on the path to measure."""

    @property
    def msgs_per_s(self) -> float | None:
        return statistics.median(self.rounds_msgs_per_s) if self.rounds_msgs_per_s else None


@dataclass(frozen=True)
class Results:
    startup_s: dict[str, list[float]]
    """Broker kind -> start-up seconds of each fresh cluster (no proxies)."""
    kind_versions: dict[str, str]
    direct_rounds_msgs_per_s: list[float]
    mechanisms: dict[Mechanism, MechanismResults]

    @property
    def direct_msgs_per_s(self) -> float:
        return statistics.median(self.direct_rounds_msgs_per_s)

    def ratio(self, mechanism: Mechanism) -> float | None:
        rate = self.mechanisms[mechanism].msgs_per_s
        return None if rate is None else rate / self.direct_msgs_per_s


def _choices(parser: argparse.ArgumentParser, text: str, allowed: Sequence[str],
             option: str) -> list[str]:
    chosen = [name.strip() for name in text.split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(allowed))
    if unknown or not chosen:
        parser.error(f"{option} takes {', '.join(allowed)}; got {unknown or 'none'}")
    return chosen


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="ci/bench_faults.py",
        description="Start-up of a cluster of each broker kind, time to apply and heal a "
        "partition on each network mechanism (real Toxiproxy, built-in proxy, iptables), and "
        "produce throughput through the proxies vs direct, in one run.")
    parser.add_argument("--messages", type=int, default=500_000,
                        help="records per throughput measurement (default: %(default)s)")
    parser.add_argument("--brokers", type=int, default=3, help="cluster size (default: 3)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="throughput measurements per cluster; the median counts "
                        "(default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=10,
                        help="partitions applied and healed per mechanism; medians shown "
                        "(default: %(default)s)")
    parser.add_argument("--startups", type=int, default=3,
                        help="fresh clusters started per broker kind; the median counts "
                        "(default: %(default)s)")
    parser.add_argument("--kinds", default=",".join(ClusterTarget),
                        help="broker kinds whose start-up is measured, comma-separated "
                        "(default: %(default)s)")
    parser.add_argument("--mechanisms", default=",".join(Mechanism),
                        help="network mechanisms to measure, comma-separated "
                        "(default: %(default)s)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT,
                        help="JSON results (default: %(default)s)")
    parser.add_argument("--markdown", action="store_true",
                        help="print the tables as Markdown (for docs/benchmarks.md)")
    args = parser.parse_args(argv)
    for option in ("messages", "repeat", "rounds", "startups"):
        if getattr(args, option) < 1:
            parser.error(f"--{option} must be >= 1, got {getattr(args, option)}")
    if args.brokers < 2:
        parser.error(f"--brokers must be >= 2 (a partition needs two sides), got {args.brokers}")
    args.kinds = _choices(parser, args.kinds, list(ClusterTarget), "--kinds")
    args.mechanisms = [Mechanism(name) for name in
                       _choices(parser, args.mechanisms, list(Mechanism), "--mechanisms")]
    return args


# --- throughput ---------------------------------------------------------------------------------

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


def produce_rounds(args: argparse.Namespace, bootstrap: str, cluster: LocalCluster) -> list[float]:
    return [measure_produce(bootstrap, cluster, min(3, args.brokers), args.messages)
            for _ in range(args.rounds)]


# --- partitions -----------------------------------------------------------------------------------

def measure_partitions(faults: Faults, node: str, repeat: int,
                       held: Callable[[], int]) -> tuple[list[float], list[float], int]:
    """Milliseconds to isolate ``node`` and to heal, ``repeat`` times each. ``held()`` counts
    the cuts the mechanism itself holds (toxics in Toxiproxy, DROP rules in the namespaces),
    checked outside the clock after every apply and heal."""
    apply_ms: list[float] = []
    heal_ms: list[float] = []
    pairs: list[tuple[str, str]] = []
    for _ in range(repeat):
        started = time.perf_counter()
        pairs = faults.isolate(node)
        apply_ms.append((time.perf_counter() - started) * 1000)
        if not pairs or held() == 0:
            raise BenchError(f"the mechanism holds no cut isolating {node}")
        started = time.perf_counter()
        faults.heal()
        heal_ms.append((time.perf_counter() - started) * 1000)
        if held():
            raise BenchError(f"{held()} cuts left after heal()")
    return apply_ms, heal_ms, len(pairs)


def toxics_held(faults: NetworkFaults) -> int:
    """Partition toxics Toxiproxy itself reports (``active()`` asks its API)."""
    return len(faults.active()["partition"])


def drop_rules_held(cluster: NetnsCluster) -> int:
    """DROP rules in every node's namespace, as ``iptables -S`` lists them."""
    net = cluster.net
    if net is None:
        raise BenchError("the namespaces are gone")
    return sum(len(net.rules(node)) for node in cluster.nodes)


# --- the mechanisms -----------------------------------------------------------------------------

def server_binary(mechanism: Mechanism) -> Path | None:
    """The executable of a Toxiproxy server: None for the built-in one."""
    if mechanism is Mechanism.BUILTIN:
        return None
    binary = find_toxiproxy_server()
    if binary is None:
        raise ToxiproxyStartError(missing_real_server_message())
    return binary


def measure_proxied(args: argparse.Namespace, spec: ClusterSpec, mechanism: Mechanism,
                    console: Console) -> MechanismResults:
    """Start-up, throughput, apply and heal on one Toxiproxy server."""
    binary = server_binary(mechanism)
    with tempfile.TemporaryDirectory(prefix="bench-faults-toxiproxy-") as server_dir:
        server = ToxiproxyProcess(Path(server_dir), binary)
        console.log(f"{mechanism}: starting Toxiproxy, ZooKeeper, {args.brokers} brokers, "
                    "proxies")
        started = time.perf_counter()
        try:
            url = server.start()
            with ProxiedCluster(spec, toxiproxy_url=url) as proxied:
                startup = time.perf_counter() - started
                described = server.info.describe()
                console.log(f"{described}: ready after {startup:.2f}s; "
                            f"producing {args.messages:,} records × {args.rounds}")
                rates = produce_rounds(args, proxied.bootstrap, proxied.cluster)
                console.log(f"{described}: isolating broker-{args.brokers} and healing "
                            f"× {args.repeat}")
                faults = NetworkFaults(proxied)
                apply_ms, heal_ms, cut = measure_partitions(
                    faults, f"broker-{args.brokers}", args.repeat, lambda: toxics_held(faults))
        finally:
            server.stop()
    return MechanismResults(mechanism, described, startup, apply_ms, heal_ms, cut, rates)


def measure_kernel(args: argparse.Namespace, spec: ClusterSpec,
                   console: Console) -> MechanismResults:
    """Start-up of the namespaced cluster, apply and heal as iptables rules."""
    console.log(f"kernel: starting ZooKeeper and {args.brokers} brokers in network namespaces")
    cluster = NetnsCluster(spec, prefix="khbench")
    started = time.perf_counter()
    try:
        cluster.start()
        startup = time.perf_counter() - started
        console.log(f"kernel: ready after {startup:.2f}s; isolating broker-{args.brokers} and "
                    f"healing × {args.repeat}")
        apply_ms, heal_ms, cut = measure_partitions(
            KernelFaults(cluster), f"broker-{args.brokers}", args.repeat,
            lambda: drop_rules_held(cluster))
    finally:
        cluster.stop()
    return MechanismResults(Mechanism.KERNEL, "iptables in network namespaces", startup,
                            apply_ms, heal_ms, cut)


# --- the run --------------------------------------------------------------------------------------

def timed_start(cluster: LocalCluster) -> float:
    started = time.perf_counter()
    cluster.start()
    return time.perf_counter() - started


def run(args: argparse.Namespace, console: Console) -> Results:
    spec = ClusterSpec(brokers=args.brokers)
    for mechanism in args.mechanisms:  # a missing server fails before anything is measured
        if mechanism.proxied:
            server_binary(mechanism)
    kinds = {name: BROKER_KINDS[name]() for name in args.kinds}
    startup: dict[str, list[float]] = {name: [] for name in kinds}
    for name, kind in kinds.items():
        # The reference kind's last start-up is the direct cluster's, measured below.
        fresh = args.startups - (name == ClusterTarget.REFERENCE)
        for number in range(fresh):
            console.log(f"{name}: starting ZooKeeper and {args.brokers} brokers "
                        f"({number + 1}/{args.startups})")
            cluster = LocalCluster(spec, kind=kind)
            try:
                startup[name].append(timed_start(cluster))
            finally:
                cluster.stop()
    console.log(f"direct: starting ZooKeeper and {args.brokers} reference brokers")
    direct = LocalCluster(spec)
    try:
        elapsed = timed_start(direct)
        if ClusterTarget.REFERENCE in startup:
            startup[ClusterTarget.REFERENCE].append(elapsed)
        console.log(f"direct: producing {args.messages:,} records × {args.rounds}")
        direct_rates = produce_rounds(args, direct.bootstrap, direct)
    finally:
        direct.stop()
    measured = {mechanism: (measure_proxied(args, spec, mechanism, console) if mechanism.proxied
                            else measure_kernel(args, spec, console))
                for mechanism in args.mechanisms}
    return Results(startup, {name: kind.version() for name, kind in kinds.items()},
                   direct_rates, measured)


# --- the report -----------------------------------------------------------------------------------

def _verdict(ok: bool) -> str:
    return "✓" if ok else "✗"


def startup_rows(args: argparse.Namespace, results: Results) -> list[list[str]]:
    """One row per broker kind: median start-up, every round, ratio to the reference's."""
    reference = (statistics.median(results.startup_s[ClusterTarget.REFERENCE])
                 if ClusterTarget.REFERENCE in results.startup_s else None)
    rows = []
    for name, rounds in results.startup_s.items():
        median = statistics.median(rounds)
        ratio = f" ({median / reference:.1f}× reference)" if reference and name != \
            ClusterTarget.REFERENCE else ""
        rows.append([f"{name} {results.kind_versions[name]}: ZooKeeper + {args.brokers} "
                     f"brokers, no proxies (median of {len(rounds)}: "
                     f"{' / '.join(f'{s:.1f}' for s in rounds)} s)",
                     f"{median:.2f} s{ratio}"])
    return rows


def mechanism_rows(args: argparse.Namespace, results: Results) -> list[list[str]]:
    """One row per measure, one column per mechanism."""
    measured = list(results.mechanisms.values())
    cut = measured[0].cut_pairs

    def throughput(m: MechanismResults) -> str:
        ratio = results.ratio(m.mechanism)
        if m.msgs_per_s is None or ratio is None:
            return "– (no proxy on the path)"
        return (f"{m.msgs_per_s:,.0f} ({ratio:.2f}×) "
                f"{_verdict(ratio >= GOALS['throughput_ratio'])}")

    def ms(values: list[float], goal: str) -> str:
        median = statistics.median(values)
        return f"{median:.1f} ms {_verdict(median < GOALS[goal])}"

    return [
        [f"start: mechanism + ZooKeeper + {args.brokers} reference brokers (+ proxies), all "
         "ready (goal < 5 s)",
         *(f"{m.startup_s:.2f} s {_verdict(m.startup_s < GOALS['startup_s'])}"
           for m in measured)],
        [f"apply: isolate broker-{args.brokers}, {cut} directed cuts (median of {args.repeat}; "
         "goal < 50 ms)", *(ms(m.apply_ms, "apply_ms") for m in measured)],
        [f"heal: every cut removed (median of {args.repeat}; goal < 50 ms)",
         *(ms(m.heal_ms, "heal_ms") for m in measured)],
        [f"produce msg/s through the mechanism (median of {args.rounds}; goal ≥ 0.85× direct)",
         *(throughput(m) for m in measured)],
        [f"produce msg/s direct, no proxies (acks=all; median of {args.rounds}; the same "
         "measurement for every column)",
         *([f"{results.direct_msgs_per_s:,.0f}"] * len(measured))],
    ]


def write_json(path: Path, args: argparse.Namespace, results: Results,
               machine: dict[str, object]) -> None:
    document = {
        "benchmark": "faults",
        "schema_version": SCHEMA_VERSION,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "load_average_1m_at_end": os.getloadavg()[0],
        "settings": {
            "messages": args.messages,
            "record_bytes": RECORD_BYTES,
            "brokers": args.brokers,
            "repeat": args.repeat,
            "rounds": args.rounds,
            "startups": args.startups,
            "producer": PRODUCER_CONFIG,
        },
        "goals": GOALS,
        "startup_s": {
            name: {"version": results.kind_versions[name], "rounds": rounds,
                   "median": statistics.median(rounds)}
            for name, rounds in results.startup_s.items()
        },
        "throughput_msgs_per_s": {
            "direct": {"rounds": results.direct_rounds_msgs_per_s,
                       "median": results.direct_msgs_per_s},
            **{m.value: {"rounds": r.rounds_msgs_per_s, "median": r.msgs_per_s,
                         "ratio_to_direct": results.ratio(m)}
               for m, r in results.mechanisms.items() if r.msgs_per_s is not None},
        },
        "mechanisms": {
            m.value: {
                "described": r.described,
                "startup_s": r.startup_s,
                "cut_pairs": r.cut_pairs,
                "median_ms": {"apply": statistics.median(r.apply_ms),
                              "heal": statistics.median(r.heal_ms)},
                "runs": {key: value for key, value in asdict(r).items()
                         if key in ("apply_ms", "heal_ms")},
            }
            for m, r in results.mechanisms.items()
        },
    }
    write_json_atomically(path, document)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    machine = machine_info()
    err = Console(stderr=True)
    started = time.perf_counter()
    try:
        results = run(args, err)
    except (PeerStartError, ToxiproxyStartError, NetnsUnavailable, NetnsError) as exc:
        err.print("[red]a cluster did not start:[/]", end=" ")
        err.print(str(exc), markup=False, highlight=False)
        return 3
    except (BenchError, ClusterWaitTimeout, KafkaException) as exc:
        err.print("[red]measurement failed:[/]", end=" ")
        err.print(str(exc), markup=False, highlight=False)
        return 1
    except KeyboardInterrupt:
        err.print("interrupted; brokers, ZooKeeper, proxies and namespaces stopped")
        return 130
    write_json(args.output, args, results, machine)
    load = f"load average {machine['load_average_1m_at_start']:.1f} at start"
    print_results(f"Start-up by broker kind ({load})", startup_rows(args, results),
                  args.markdown)
    print()
    print_results(f"Network mechanisms: {args.brokers} brokers; {args.messages:,} × "
                  f"{RECORD_BYTES}-byte records; partitions × {args.repeat}; {load}",
                  mechanism_rows(args, results), args.markdown,
                  headers=["measure", *(m.described for m in results.mechanisms.values())])
    err.print(f"results written to {args.output} in {time.perf_counter() - started:.0f} s",
              highlight=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
