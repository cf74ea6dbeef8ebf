"""The main job until the full harness run exists: a reference broker and one round trip.

Starts the reference broker as a process, produces records with confluent-kafka (acks=all,
idempotent), consumes them back in assign mode, checks every value arrived once and in order,
restarts the broker and reads them again from disk, then stops it and reports.
"""

from __future__ import annotations

import json
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from harness.cluster.errors import PeerStartError
from harness.cluster.peers import ReferenceBroker

# The round trip restarts the broker on purpose: librdkafka need not log the disconnects.
_QUIET = {"log.connection.close": False}


@dataclass
class RoundTrip:
    bootstrap: str
    topic: str
    produced: int
    acked: int
    consumed: int
    consumed_after_restart: int
    in_order: bool
    produce_seconds: float
    consume_seconds: float
    broker_exit_code: int | None
    log_path: str

    @property
    def ok(self) -> bool:
        return (self.acked == self.produced == self.consumed == self.consumed_after_restart
                and self.in_order and self.broker_exit_code == 0)

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "ok": self.ok}


def _consume_all(
    bootstrap: str, topic: str, expected: int, timeout_s: float
) -> list[bytes | None]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafka-harness-demo",
                         "enable.auto.commit": False, **_QUIET})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values: list[bytes | None] = []
    deadline = time.monotonic() + timeout_s
    while len(values) < expected and time.monotonic() < deadline:
        for message in consumer.consume(num_messages=10_000, timeout=0.5):
            if message.error() is None:
                values.append(message.value())
    consumer.close()
    return values


def run_round_trip(run_dir: Path, records: int = 10_000) -> RoundTrip:
    broker = ReferenceBroker(run_dir)
    broker.start()
    try:
        topic = f"demo-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=10)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5, **_QUIET})
        acked = 0

        def on_delivery(err: object, _msg: object) -> None:
            nonlocal acked
            acked += err is None

        values = [f"demo-{i:08d}".encode() for i in range(records)]
        started = time.monotonic()
        for value in values:
            producer.produce(topic, value=value, on_delivery=on_delivery)
            producer.poll(0)
        producer.flush(60)
        produce_seconds = time.monotonic() - started
        started = time.monotonic()
        consumed = _consume_all(broker.bootstrap, topic, records, 60)
        consume_seconds = time.monotonic() - started
        broker.stop()
        broker.start()
        again = _consume_all(broker.bootstrap, topic, records, 60)
    finally:
        broker.stop()
    return RoundTrip(broker.bootstrap, topic, records, acked, len(consumed), len(again),
                     consumed == values and again == values, produce_seconds, consume_seconds,
                     broker.returncode, str(broker.log_path))


def run_command(records: int, run_dir: Path | None, as_json: bool) -> int:
    """`kafka-harness demo`: run the round trip, print a summary, return the exit code."""
    console = Console(stderr=as_json)
    workdir = run_dir or Path(tempfile.mkdtemp(prefix="kafka-harness-demo-"))
    try:
        with console.status("starting a reference broker and running the round trip…"):
            result = run_round_trip(workdir, records)
    except PeerStartError as exc:
        console.print(f"[red]infrastructure could not start:[/red] {exc}")
        return 3
    if as_json:
        print(json.dumps(result.as_dict()))
    else:
        table = Table(title="reference broker round trip", show_header=False)
        table.add_row("bootstrap", result.bootstrap)
        table.add_row("topic", result.topic)
        table.add_row("produced / acked", f"{result.produced:,} / {result.acked:,}")
        table.add_row("consumed", f"{result.consumed:,} in "
                      f"{result.consume_seconds:.2f} s")
        table.add_row("read back after restart", f"{result.consumed_after_restart:,}")
        table.add_row("every value once, in order", "yes" if result.in_order else "NO")
        table.add_row("produce time", f"{result.produce_seconds:.2f} s")
        table.add_row("broker exit code (SIGTERM)", str(result.broker_exit_code))
        table.add_row("broker log", result.log_path)
        console.print(table)
        console.print("[green]OK[/green]" if result.ok else "[red]FAILED[/red]")
    return 0 if result.ok else 1
