"""What a consuming group meets when its topics change under it: a topic deleted under a
group subscribed by name or by pattern, a topic deleted and created again (a new topic id)
under a group with committed offsets, partitions added to a consumed topic.

A consumer that assign()ed a partition of a deleted topic is not tested: librdkafka 2.x reports
nothing to it within 30 s on Apache Kafka 3.9.2, 4.4 and the reference broker alike (measured
2026-11-27), so there is no broker behaviour to tell apart.

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
from confluent_kafka import OFFSET_INVALID, KafkaException, TopicPartition
from confluent_kafka.admin import NewPartitions, NewTopic

from harness.cluster.targets import Target
from harness.waiting import wait_for

from ..support import produce_all

REFRESH_MS = 1000  # the member's full metadata refresh, where its pattern is evaluated again
SETTLE_S = 30.0


def _value(consumer: Any) -> bytes | None:
    """The next record's value, if a poll brings one."""
    message = consumer.poll(0.2)
    return message.value() if message is not None and message.error() is None else None


def _wait_unassigned(consumer: Any, topic: str) -> None:
    def unassigned() -> bool:
        consumer.poll(0.2)
        return not consumer.assignment()

    wait_for(unassigned, SETTLE_S, f"the member to be assigned nothing once {topic} is deleted")


def _delete(admin: Any, topic: str) -> None:
    admin.delete_topics([topic], operation_timeout=30)[topic].result(60)


def _re_create(admin: Any, target: Target, topic: str) -> None:
    """Create `topic` again once its deletion has finished: until then Kafka answers
    TOPIC_ALREADY_EXISTS ("marked for deletion")."""
    def created() -> bool:
        try:
            admin.create_topics([NewTopic(topic, 1, min(3, target.brokers))],
                                operation_timeout=30)[topic].result(60)
        except KafkaException:
            return False
        return True

    wait_for(created, SETTLE_S, f"{topic} to be created again after its deletion")


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
    produce_all(kafka_producer(), topic, [b"one"])
    consumer = kafka_consumer({"partition.assignment.strategy": "roundrobin",
                               "auto.offset.reset": "earliest",
                               "topic.metadata.refresh.interval.ms": REFRESH_MS})
    consumer.subscribe([f"^{re.escape(topic)}$"])
    assert wait_for(lambda: _value(consumer), SETTLE_S, f"the record produced to {topic}") \
        == b"one"
    assert [(tp.topic, tp.partition) for tp in consumer.assignment()] == [(topic, 0)]
    _delete(kafka_admin, topic)
    _wait_unassigned(consumer, topic)


@pytest.mark.requires_create_topics
def test_a_topic_deleted_and_re_created_under_a_group_has_no_committed_offset(
        kafka_target: Target, kafka_admin: Any, kafka_producer: Callable[..., Any],
        kafka_consumer: Callable[..., Any], kafka_names: Callable[[str], str],
        make_topic: Callable[..., str]) -> None:
    """A group commits offset 2 of a topic and stops; the topic is deleted and created again
    under the same name (a new topic id). The group has no committed offset of it, and reads
    the new topic from its first record [Kafka removes a deleted topic's offsets from every
    group: GroupCoordinator.onPartitionsDeleted, called from UpdateMetadata in ZooKeeper mode
    and from the metadata image in KRaft mode]. A kept offset 2 would have started the group
    at the new topic's third record."""
    topic = make_topic(partitions=1)
    group = kafka_names("group")
    produce_all(kafka_producer(), topic, [b"old-0", b"old-1"])
    first = kafka_consumer({"group.id": group, "auto.offset.reset": "earliest",
                            "enable.auto.commit": False})
    first.subscribe([topic])
    seen: list[bytes] = []

    def read_both() -> bool:
        message = first.poll(0.2)
        if message is not None and message.error() is None:
            seen.append(message.value())
        return len(seen) == 2

    wait_for(read_both, SETTLE_S, f"the two records produced to {topic}")
    first.commit(asynchronous=False)
    assert [tp.offset for tp in first.committed([TopicPartition(topic, 0)], timeout=30)] == [2]
    first.close()
    _delete(kafka_admin, topic)
    _re_create(kafka_admin, kafka_target, topic)
    # A new producer: one that knew the deleted topic may hold its metadata of no partitions
    # for a moment and fail the records as an unknown partition (seen under load).
    produce_all(kafka_producer(), topic, [b"new-0", b"new-1", b"new-2"])
    second = kafka_consumer({"group.id": group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})

    def committed() -> int:
        return second.committed([TopicPartition(topic, 0)], timeout=30)[0].offset

    # KRaft brokers remove the offsets as they publish the metadata image, not before
    # DeleteTopics answers: wait for it, bounded, rather than race it.
    wait_for(lambda: committed() == OFFSET_INVALID, SETTLE_S,
             f"the group to have no committed offset of the re-created {topic}")
    second.subscribe([topic])

    def read() -> tuple[int, bytes] | None:
        message = second.poll(0.2)
        if message is None or message.error() is not None:
            return None
        return message.offset(), message.value()

    assert wait_for(read, SETTLE_S, f"the first record of the re-created {topic}") \
        == (0, b"new-0")


@pytest.mark.requires_create_topics
def test_a_group_subscribed_by_name_to_a_deleted_topic_is_assigned_nothing(
        kafka_admin: Any, kafka_producer: Callable[..., Any],
        kafka_consumer: Callable[..., Any], make_topic: Callable[..., str]) -> None:
    """A member subscribed to a topic by name reads it; once the topic is deleted, Metadata
    answers UNKNOWN_TOPIC_OR_PARTITION for it, the member rejoins and the leader assigns
    nothing of it [Kafka's ConsumerCoordinator and librdkafka drop a subscribed topic that
    metadata no longer has from the assignment; the broker's part is that answer]."""
    topic = make_topic(partitions=1)
    produce_all(kafka_producer(), topic, [b"one"])
    consumer = kafka_consumer({"auto.offset.reset": "earliest",
                               "topic.metadata.refresh.interval.ms": REFRESH_MS})
    consumer.subscribe([topic])
    assert wait_for(lambda: _value(consumer), SETTLE_S, f"the record produced to {topic}") \
        == b"one"
    _delete(kafka_admin, topic)
    _wait_unassigned(consumer, topic)


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
    produce_all(kafka_producer(), topic, [b"new"], partition=1)

    def read() -> tuple[int, bytes] | None:
        message = consumer.poll(0.2)
        if message is None or message.error() is not None:
            return None
        return message.partition(), message.value()

    assert wait_for(read, SETTLE_S, f"the record produced to {topic}/1") == (1, b"new")
