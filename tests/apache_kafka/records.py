"""Producing and reading back records on an Apache Kafka cluster the tests run, through its
client proxies, as a client would: what the ZooKeeper-mode and KRaft cluster tests share."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition

READ_TIMEOUT_S = 60


def produce(bootstrap: str, topic: str, values: list[bytes], *, idempotent: bool = True) -> None:
    """Every value acknowledged (acks=all and idempotent, or acks=1 when not idempotent)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all" if idempotent else "1",
                         "enable.idempotence": idempotent, "message.timeout.ms": 60000})
    errors: list[str] = []
    for value in values:
        producer.produce(topic, value,
                         on_delivery=lambda err, _m: errors.append(str(err)) if err else None)
    assert producer.flush(60) == 0
    assert errors == []


def read_all(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    """Partition 0 of ``topic`` from its start, until ``expected`` records (or the timeout)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + READ_TIMEOUT_S
    try:
        while len(values) < expected and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=1.0):
                assert message.error() is None, message.error()
                values.append(message.value())
    finally:
        consumer.close()
    return values
