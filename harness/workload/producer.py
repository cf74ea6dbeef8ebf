"""A producer client that records every send: invoke, then ok (partition, offset), fail or info.

Each value is ``"<process>-<n>"``, unique in the run because process numbers are. The invoke row
is written before ``produce()`` so its time is when the client asked; the completion row comes
from the delivery report. When the run ends the producer flushes, then purges what is still
queued or in flight, so every send gets a completion row (a purged in-flight send is ``info``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from harness.workload.context import QUIET, RunContext
from harness.workload.outcomes import error_name, send_outcome


@dataclass(frozen=True)
class ProducerSpec:
    """One producer's settings (librdkafka's names where there is one).

    ``keys``: how many distinct keys to cycle through (0: no key). ``partitions``: when > 0 the
    producer names the partition itself, cycling through 0..partitions-1; 0 leaves it to the
    partitioner (by key). ``retries`` None keeps librdkafka's default. ``rate`` is sends per
    second for this process.
    """

    bootstrap: str
    topics: tuple[str, ...]
    acks: str = "all"
    idempotence: bool = True
    retries: int | None = None
    max_in_flight: int = 5
    linger_ms: int = 5
    keys: int = 0
    partitions: int = 0
    rate: float = 100.0
    delivery_timeout_ms: int = 10_000
    request_timeout_ms: int = 5_000
    flush_timeout_s: float = 15.0
    max_sends: int | None = None
    config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.topics:
            raise ValueError("a producer needs at least one topic")
        if self.acks not in ("0", "1", "all", "-1"):
            raise ValueError(f"acks must be one of 0, 1, all, -1; got {self.acks!r}")
        if self.rate <= 0:
            raise ValueError(f"rate must be > 0, got {self.rate}")

    def client_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "acks": self.acks,
            "enable.idempotence": self.idempotence,
            "max.in.flight.requests.per.connection": self.max_in_flight,
            "linger.ms": self.linger_ms,
            "delivery.timeout.ms": self.delivery_timeout_ms,
            "request.timeout.ms": self.request_timeout_ms,
            **QUIET,
        }
        if self.retries is not None:
            config["retries"] = self.retries
        return {**config, **self.config}

    @property
    def single_attempt(self) -> bool:
        return self.retries == 0 and not self.idempotence


class RecordingProducer:
    """Sends unique values at a steady rate until the run's end, recording each send."""

    def __init__(self, spec: ProducerSpec, context: RunContext) -> None:
        self.spec = spec
        self.context = context
        self.recorder = context.recorder()
        self.producer = Producer(spec.client_config())
        self.sent = 0
        self.fatal: KafkaError | None = None

    def _on_delivery(self, op: int, topic: str, key: str | None, value: str):
        def report(error: KafkaError | None, message: Message) -> None:
            if error is None:
                offset = message.offset()
                self.recorder.record("ok", "send", op, topic=topic, key=key, value=value,
                                     partition=message.partition(),
                                     offset=offset if offset is not None and offset >= 0 else None)
                return
            if error.fatal():
                self.fatal = error
            self.recorder.record(send_outcome(error, single_attempt=self.spec.single_attempt),
                                 "send", op, topic=topic, key=key, value=value,
                                 partition=message.partition() if message else -1,
                                 error=error_name(error))
        return report

    def send_one(self) -> None:
        n = self.sent
        self.sent += 1
        topic = self.spec.topics[n % len(self.spec.topics)]
        key = f"k{n % self.spec.keys}" if self.spec.keys else None
        partition = n % self.spec.partitions if self.spec.partitions else -1
        value = f"{self.context.process}-{n}"
        op = self.recorder.next_op()
        self.recorder.record("invoke", "send", op, topic=topic, key=key, value=value,
                             partition=partition)
        arguments: dict[str, Any] = {"value": value.encode(),
                                     "on_delivery": self._on_delivery(op, topic, key, value)}
        if key is not None:
            arguments["key"] = key.encode()
        if partition >= 0:
            arguments["partition"] = partition
        try:
            self.producer.produce(topic, **arguments)
        except BufferError:
            self.recorder.record("fail", "send", op, topic=topic, key=key, value=value,
                                 partition=partition, error="_QUEUE_FULL")
        except KafkaException as exc:
            error = exc.args[0]
            self.recorder.record(send_outcome(error, single_attempt=True), "send", op,
                                 topic=topic, key=key, value=value, partition=partition,
                                 error=error_name(error))
        self.producer.poll(0)

    def run(self) -> int:
        """Send until the run ends (or max_sends); returns 0, or 1 after a fatal error (the
        idempotent producer cannot go on; the generator starts a new process instead)."""
        interval = 1.0 / self.spec.rate
        next_at = time.monotonic()
        try:
            while self.context.remaining_s() > 0 and self.fatal is None:
                if self.spec.max_sends is not None and self.sent >= self.spec.max_sends:
                    break
                self.send_one()
                next_at += interval
                pause = next_at - time.monotonic()
                if pause > 0:
                    self.producer.poll(pause)
                else:
                    next_at = time.monotonic()  # behind (the queue was full): do not burst
            self.producer.flush(self.spec.flush_timeout_s)
        finally:
            self.producer.purge()  # what is left gets _PURGE_QUEUE / _PURGE_INFLIGHT reports
            self.producer.poll(0)
            self.producer.flush(0)
            self.recorder.close()
        return 1 if self.fatal is not None else 0


def run(spec: ProducerSpec, context: RunContext) -> int:
    return RecordingProducer(spec, context).run()
