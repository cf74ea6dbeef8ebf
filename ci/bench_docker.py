"""Docker backend benchmark: how long ``up`` takes from cached images, and what the containers
cost a producer, against the local backend in the same run.

* up — wall time of :meth:`DockerCluster.start` for ``--brokers`` brokers (network, Toxiproxy
  container and its proxies, ZooKeeper, brokers, until every broker's Metadata lists all),
  with the project image already built (it is built first, outside the clock, if missing);
  then the time of :meth:`DockerCluster.stop` (every container and the network removed).
  The goal of issue 8 is < 10 s for 3 brokers.
* throughput — :func:`bench_cluster.measure_produce` (acks=all, 100-byte records, partition 0
  of a topic replicated ``min(3, brokers)`` times) through the client proxies, on the docker
  backend and on the local process backend behind the same proxies (``ProxiedCluster``), so
  the two numbers differ only by where the nodes run.

Results: a table (``--markdown`` for the README) and ``bench-results/docker.json``. Exit codes:
0 measured, 1 a measurement failed, 2 usage, 3 no engine or a cluster could not start.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench_cluster import BenchError, create_topic, measure_produce
from bench_common import machine_info, print_results, write_json_atomically
from rich.console import Console

from harness.cluster.docker.backend import DockerCluster
from harness.cluster.docker.images import (
    EngineUnavailable,
    build_project_image,
    ensure_base_image,
    ensure_engine,
)
from harness.cluster.errors import PeerStartError
from harness.cluster.proxied import ProxiedCluster
from harness.cluster.spec import ClusterSpec
from harness.waiting import ClusterWaitTimeout

ROOT = Path(__file__).resolve().parent.parent


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=1, help="times to up and down")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--output", type=Path, default=ROOT / "bench-results" / "docker.json")
    args = parser.parse_args(argv)
    for name in ("brokers", "messages", "repeat"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    return args


def throughput(cluster: ProxiedCluster, messages: int) -> float:
    """Records per second through the client proxies."""
    topic = create_topic(cluster.bootstrap, 1, min(3, cluster.spec.brokers))
    return messages / measure_produce(cluster.bootstrap, topic, messages)


def run(args: argparse.Namespace, console: Console) -> dict[str, object]:
    engine = ensure_engine()
    started = time.monotonic()
    image = build_project_image(engine, ensure_base_image(engine))
    console.print(f"image {image} ready in {time.monotonic() - started:.1f}s")
    spec = ClusterSpec(brokers=args.brokers)
    ups, downs, docker_rate = [], [], 0.0
    for round_number in range(args.repeat):
        cluster = DockerCluster(spec, image=image, client=engine)
        started = time.monotonic()
        cluster.start()
        try:
            ups.append(time.monotonic() - started)
            console.print(f"up #{round_number + 1}: {ups[-1]:.1f}s")
            if round_number == 0:
                docker_rate = throughput(cluster, args.messages)
        finally:
            started = time.monotonic()
            cluster.stop()
            downs.append(time.monotonic() - started)
    started = time.monotonic()
    with ProxiedCluster(spec) as local:
        local_up = time.monotonic() - started
        local_rate = throughput(local, args.messages)
    return {"image": image, "up_s": ups, "down_s": downs, "local_up_s": local_up,
            "docker_records_per_s": docker_rate, "local_records_per_s": local_rate}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    err = Console(stderr=True)
    machine = machine_info()
    try:
        results = run(args, err)
    except (EngineUnavailable, PeerStartError) as exc:
        err.print(f"[red]could not start:[/] {exc}", highlight=False)
        return 3
    except (BenchError, ClusterWaitTimeout) as exc:
        err.print(f"[red]measurement failed:[/] {exc}", highlight=False)
        return 1
    write_json_atomically(args.output, {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "brokers": args.brokers, "messages": args.messages, "machine": machine, **results})
    ups, downs = results["up_s"], results["down_s"]
    assert isinstance(ups, list) and isinstance(downs, list)
    rows = [
        [f"docker up, {args.brokers} brokers, cached image (best of {len(ups)})",
         f"{min(ups):.1f} s"],
        ["docker down (every container and the network removed)", f"{min(downs):.1f} s"],
        [f"local (processes) up, {args.brokers} brokers behind proxies",
         f"{results['local_up_s']:.1f} s"],
        ["produce through proxies, docker", f"{results['docker_records_per_s']:,.0f} rec/s"],
        ["produce through proxies, local", f"{results['local_records_per_s']:,.0f} rec/s"],
    ]
    print_results(f"Docker backend: {args.messages:,} × 100-byte records, acks=all", rows,
                  args.markdown)
    err.print(f"results written to {args.output}", highlight=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
