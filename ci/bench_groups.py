"""Consumer-group benchmark: 10-member join time and OffsetCommit throughput, reference vs Tansu.

One run, same machine, same confluent-kafka settings for both targets:

* join — ten Consumers subscribe to a fresh 10-partition topic in one new group (range
  assignor); the clock runs from the first subscribe (before its FindCoordinator and JoinGroup)
  until every member's on_assign callback has delivered a partition. The reference broker runs
  with ``group.initial.rebalance.delay.ms`` = ``--initial-delay-ms``; as in Kafka (KIP-134),
  members that arrive while the delay runs extend it by one more delay, so ten members that join
  within the first window finish after about two delays. Tansu's delay is its own (not
  configurable from outside), so its time is shown without a ratio.
* commits — one Consumer in assign mode (a simple consumer: no membership, generation -1) commits
  ``--commits`` distinct offsets synchronously, one after another; each commit is acknowledged
  only once it is appended to the group's ``__consumer_offsets`` partition. commits/s = commits
  / elapsed.

Goals (issue 4): join within 1.2x group.initial.rebalance.delay.ms; commits/s >= Tansu. Results go
to a table (``--markdown`` for the README) and ``bench-results/groups.json``. Exit codes: 0
measured, 3 a target could not start.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

import confluent_kafka
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from harness.cluster.errors import PeerStartError
from harness.cluster.peers import BrokerProcess, ReferenceBroker, TansuBroker

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = REPO_ROOT / "bench-results" / "groups.json"
MEMBERS = 10
JOIN_GOAL = 1.2
QUIET = {"log.connection.close": False}


def _topic(bootstrap: str, partitions: int) -> str:
    name = f"bench-groups-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)
    return name


def measure_join(bootstrap: str, timeout_s: float = 120.0) -> float:
    topic = _topic(bootstrap, MEMBERS)
    group = f"bench-join-{uuid.uuid4().hex[:8]}"
    assigned: set[int] = set()
    consumers = []
    for _ in range(MEMBERS):
        consumers.append(Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "partition.assignment.strategy": "range", "session.timeout.ms": 30000, **QUIET}))

    def on_assign(index: int):
        def callback(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
            if partitions:
                assigned.add(index)
        return callback

    started = time.monotonic()
    try:
        for i, consumer in enumerate(consumers):
            consumer.subscribe([topic], on_assign=on_assign(i))
        while len(assigned) < MEMBERS:
            if time.monotonic() - started > timeout_s:
                raise TimeoutError(f"only {len(assigned)} of {MEMBERS} members were assigned")
            for consumer in consumers:
                consumer.poll(0.01)
        return time.monotonic() - started
    finally:
        for consumer in consumers:
            consumer.close()


def measure_commits(bootstrap: str, commits: int) -> float:
    topic = _topic(bootstrap, 1)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id":
                         f"bench-commit-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                         **QUIET})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)  # warm up
        started = time.monotonic()
        for offset in range(1, commits + 1):
            consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
        elapsed = time.monotonic() - started
        (committed,) = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        if committed.offset != commits:
            raise AssertionError(f"committed offset {committed.offset}, expected {commits}")
        return commits / elapsed
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--initial-delay-ms", type=int, default=3000,
                        help="group.initial.rebalance.delay.ms of the reference broker")
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    console = Console()
    targets: dict[str, BrokerProcess] = {
        "reference": ReferenceBroker(properties={
            "group.initial.rebalance.delay.ms": args.initial_delay_ms}),
        "tansu": TansuBroker(),
    }
    joins: dict[str, list[float]] = {name: [] for name in targets}
    rates: dict[str, list[float]] = {name: [] for name in targets}
    try:
        for name, broker in targets.items():
            try:
                broker.start()
            except PeerStartError as exc:
                console.print(f"[red]{name} could not start:[/red] {exc}")
                return 3
        for round_ in range(1, args.repeat + 1):
            for name, broker in targets.items():
                joins[name].append(measure_join(broker.bootstrap))
                rates[name].append(measure_commits(broker.bootstrap, args.commits))
                console.log(f"round {round_} {name}: join {joins[name][-1]:.2f} s, "
                            f"{rates[name][-1]:,.0f} commits/s")
    finally:
        for broker in targets.values():
            broker.stop()
    join = {n: statistics.median(v) for n, v in joins.items()}
    rate = {n: statistics.median(v) for n, v in rates.items()}
    delay_s = args.initial_delay_ms / 1000
    join_ratio = join["reference"] / delay_s
    commit_ratio = rate["reference"] / rate["tansu"]
    rows = [
        ("reference", f"{join['reference']:.2f} s ({join_ratio:.2f}× delay)",
         f"{rate['reference']:,.0f}"),
        ("tansu", f"{join['tansu']:.2f} s", f"{rate['tansu']:,.0f}"),
        ("goal", f"≤ {JOIN_GOAL}× delay: {'PASS' if join_ratio <= JOIN_GOAL else 'FAIL'}",
         f"≥ 1.0× Tansu: {commit_ratio:.2f}× {'PASS' if commit_ratio >= 1 else 'FAIL'}"),
    ]
    header = ("target", f"join of {MEMBERS} members (delay {args.initial_delay_ms} ms)",
              "sync commits/s")
    if args.markdown:
        print("| " + " | ".join(header) + " |\n|---|---:|---:|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        table = Table(title=f"Consumer groups, median of {args.repeat} rounds")
        for column in header:
            table.add_column(column)
        for row in rows:
            table.add_row(*row)
        console.print(table)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({
        "benchmark": "consumer-groups",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "confluent_kafka": confluent_kafka.version()[0],
        "librdkafka": confluent_kafka.libversion()[0],
        "settings": {"members": MEMBERS, "initial_delay_ms": args.initial_delay_ms,
                     "commits": args.commits, "repeat": args.repeat},
        "join_seconds": joins, "commits_per_s": rates,
        "medians": {"join_seconds": join, "commits_per_s": rate},
        "ratios": {"join_over_delay": join_ratio, "commits_reference_over_tansu": commit_ratio},
    }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
