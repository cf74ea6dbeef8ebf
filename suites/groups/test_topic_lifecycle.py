"""What a consuming group meets when its topics change under it.

A regex subscription is the client's: the coordinator only sees the topics the member joins
with. The member evaluates its pattern against the cluster's metadata at each full refresh, so
a deleted topic leaves the subscription when the broker's metadata stops listing it — the
member then rejoins with what its pattern still matches and the leader assigns that. Until
that refresh the member keeps the partition and asks for its leader; librdkafka does so several
times a second against Apache Kafka 3.9.2 and the reference broker alike (30 s measured on
both, 2026-11-27), which is the client's doing, not a broker's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import NewPartitions

from harness.cluster.targets import Target
from harness.waiting import wait_for

REFRESH_MS = 1000  # the member's full metadata refresh, where its pattern is evaluated again
SETTLE_S = 30.0


@pytest.mark.requires_create_topics
def test_a_regex_subscribed_group_whose_topic_is_deleted_is_assigned_nothing(
        kafka_target: Target, kafka_admin: Any, kafka_producer: Callable[..., Any],
        kafka_consumer: Callable[..., Any], make_topic: Callable[..., str]) -> None:
    """A round-robin group member subscribed by a pattern that matches one topic reads it; once
    the topic is deleted, its next metadata refresh no longer lists the topic, the member
    rejoins subscribed to nothing and is assigned nothing [the consumer's pattern subscription:
    Kafka's ConsumerCoordinator and librdkafka re-match it on each metadata refresh; the
    broker's part is a Metadata of every topic that leaves the deleted one out]."""
    topic = make_topic(partitions=1)
    producer = kafka_producer()
    producer.produce(topic, b"one")
    assert producer.flush(30) == 0
    consumer = kafka_consumer({"partition.assignment.strategy": "roundrobin",
                               "auto.offset.reset": "earliest",
                               "topic.metadata.refresh.interval.ms": REFRESH_MS})
    consumer.subscribe([f"^{re.escape(topic)}$"])

    def read() -> bytes | None:
        message = consumer.poll(0.2)
        return message.value() if message is not None and message.error() is None else None

    assert wait_for(read, SETTLE_S, f"the record produced to {topic}") == b"one"
    assert [(tp.topic, tp.partition) for tp in consumer.assignment()] == [(topic, 0)]
    kafka_admin.delete_topics([topic], operation_timeout=30)[topic].result(60)

    def unassigned() -> bool:
        consumer.poll(0.2)
        return not consumer.assignment()

    wait_for(unassigned, SETTLE_S, f"the member to be assigned nothing once {topic} is deleted")


@pytest.mark.requires_create_topics
def test_partitions_added_to_a_consumed_topic_are_assigned_and_read(
        kafka_admin: Any, kafka_producer: Callable[..., Any],
        kafka_consumer: Callable[..., Any], make_topic: Callable[..., str]) -> None:
    """A group member subscribed to a topic by name is assigned the partitions CreatePartitions
    adds to it, at its next metadata refresh, and reads what is produced there from the start
    [KIP-195 CreatePartitions; the consumer rejoins when a subscribed topic's partition count
    changes — Kafka's ConsumerCoordinator, librdkafka alike]."""
    topic = make_topic(partitions=1)
    consumer = kafka_consumer({"auto.offset.reset": "earliest",
                               "topic.metadata.refresh.interval.ms": REFRESH_MS})
    consumer.subscribe([topic])

    def assigned() -> list[int]:
        consumer.poll(0.2)
        return sorted(tp.partition for tp in consumer.assignment())

    assert wait_for(assigned, SETTLE_S, f"the member to be assigned {topic}") == [0]
    kafka_admin.create_partitions([NewPartitions(topic, 2)], operation_timeout=30)[topic] \
        .result(60)
    wait_for(lambda: assigned() == [0, 1], SETTLE_S, f"the member to be assigned {topic}/1")
    producer = kafka_producer()
    producer.produce(topic, b"new", partition=1)
    assert producer.flush(30) == 0

    def read() -> tuple[int, bytes] | None:
        message = consumer.poll(0.2)
        if message is None or message.error() is not None:
            return None
        return message.partition(), message.value()

    assert wait_for(read, SETTLE_S, f"the record produced to {topic}/1") == (1, b"new")
