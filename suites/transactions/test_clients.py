"""Real clients' transactions end to end: what a committed transaction wrote is read by a
read_committed consumer, what an aborted one wrote never is (KIP-98)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harness.cluster.targets import Target
from harness.waiting import wait_for

pytestmark = pytest.mark.requires_transactions

CLIENT_TIMEOUT_S = 30.0
COMMITTED = [b"c-1", b"c-2", b"c-3", b"c-4"]
ABORTED = [b"a-1", b"a-2"]


def _round_trip(begin: Callable[[], None], send: Callable[[bytes], None],
                commit: Callable[[], None], abort: Callable[[], None]) -> None:
    """Commit three values, abort two, commit one more: one partition, in that log order, so
    a consumer that has read the last committed value has passed the aborted ones."""
    for values, end in ((COMMITTED[:3], commit), (ABORTED, abort), (COMMITTED[3:], commit)):
        begin()
        for value in values:
            send(value)
        end()


def _read_until_last_committed(poll: Callable[[], list[bytes]]) -> list[bytes]:
    read: list[bytes] = []

    def more() -> bool:
        read.extend(poll())
        return len(read) >= len(COMMITTED) or bool(set(read) & set(ABORTED))

    wait_for(more, CLIENT_TIMEOUT_S, "a read_committed consumer to read the committed values",
             retry_on=())
    return read


def test_confluent_kafka_commits_and_aborts_and_read_committed_sees_only_commits(
        kafka_target: Target, make_topic: Callable[..., str],
        kafka_producer: Callable[..., Any], kafka_consumer: Callable[..., Any],
        kafka_names: Callable[[str], str]) -> None:
    """librdkafka's transactional producer commits and aborts; its read_committed consumer reads the committed values in order and never an aborted one [KIP-98; librdkafka's transactions].

    The producer flushes before it ends each transaction, and a read_uncommitted consumer
    reads all six values, the aborted among them: the aborted ones reached the log (librdkafka
    drops the records it has not sent when it aborts).
    """  # noqa: E501
    topic = make_topic(1)
    producer = kafka_producer({"transactional.id": kafka_names("txn")})
    producer.init_transactions(CLIENT_TIMEOUT_S)

    def send(value: bytes) -> None:
        producer.produce(topic, value)

    def end(commit: bool) -> Callable[[], None]:
        method = producer.commit_transaction if commit else producer.abort_transaction

        def finish() -> None:
            # librdkafka purges what it has not sent yet when it aborts: flushed first, the
            # aborted values are in the log, so it is the broker that keeps them unread.
            assert producer.flush(CLIENT_TIMEOUT_S) == 0, "records left unsent"
            method(CLIENT_TIMEOUT_S)

        return finish

    _round_trip(producer.begin_transaction, send, end(True), end(False))

    def reader(isolation: str) -> Callable[[], list[bytes]]:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        consumer = kafka_consumer({"isolation.level": isolation, "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])  # no group to join
        return lambda: [m.value() for m in consumer.consume(10, 0.5) if m.error() is None]

    assert _read_until_last_committed(reader("read_committed")) == COMMITTED
    everything: list[bytes] = []
    poll = reader("read_uncommitted")

    def all_six() -> bool:
        everything.extend(poll())
        return len(everything) >= len(COMMITTED + ABORTED)

    wait_for(all_six, CLIENT_TIMEOUT_S, "a read_uncommitted consumer to read all six values")
    assert everything == COMMITTED[:3] + ABORTED + COMMITTED[3:]


@pytest.fixture
def kafka_python(kafka_target: Target) -> Iterator[Callable[..., Any]]:
    """``kafka_python(kind, *args, **config)``: a kafka-python KafkaProducer or KafkaConsumer
    on the target, closed after the test; skips when kafka-python is not installed."""
    if importlib.util.find_spec("kafka") is None:
        pytest.skip("kafka-python is not installed")
    import kafka

    made: list[Any] = []

    def make(kind: str, *args: Any, **config: Any) -> Any:
        client = getattr(kafka, kind)(*args, bootstrap_servers=kafka_target.bootstrap.split(","),
                                      **config)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def test_kafka_python_commits_and_aborts_and_read_committed_sees_only_commits(
        kafka_python: Callable[..., Any], make_topic: Callable[..., str],
        kafka_names: Callable[[str], str]) -> None:
    """kafka-python's transactional producer commits and aborts; its read_committed consumer reads the committed values in order and never an aborted one [KIP-98; kafka-python's KafkaProducer transactions].
    """  # noqa: E501
    topic = make_topic(1)
    producer = kafka_python("KafkaProducer", transactional_id=kafka_names("txn"))
    if not hasattr(producer, "init_transactions"):
        pytest.skip("this kafka-python has no transactional producer")
    producer.init_transactions()

    def send(value: bytes) -> None:
        producer.send(topic, value).get(CLIENT_TIMEOUT_S)

    _round_trip(producer.begin_transaction, send, producer.commit_transaction,
                producer.abort_transaction)
    from kafka import TopicPartition

    consumer = kafka_python("KafkaConsumer", isolation_level="read_committed",
                            enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    read = _read_until_last_committed(
        lambda: [r.value for rs in consumer.poll(500).values() for r in rs])
    assert read == COMMITTED
