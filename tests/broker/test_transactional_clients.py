"""Real clients' transactions against the reference broker, end to end: librdkafka's
transactional producer and read_committed consumer, and its consume-transform-produce loop
(send_offsets_to_transaction, TxnOffsetCommit), on the shared single broker.

What the coordinator, the markers and the log each do is tested apart (test_transactions.py,
test_transaction_markers.py); this is the whole path a Kafka application takes (KIP-98, KIP-447):
committed records are read, aborted ones never are, and the input offsets committed in a
transaction move only when it commits.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Message, Producer, TopicPartition

from harness.waiting import wait_for

from .conftest import create_topic

TIMEOUT_S = 30.0


def _consumer(bootstrap: str, group: str, **config: object) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, **config})


def _read(consumer: Consumer, count: int) -> list[bytes]:
    """`count` values, polled until they came (a read_committed consumer sees a transaction's
    records only once its marker is written)."""
    got: list[bytes] = []

    def more() -> bool:
        message: Message | None = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
        return len(got) >= count

    wait_for(more, TIMEOUT_S, f"{count} committed values")
    return got


@pytest.fixture
def producer(broker) -> Iterator[Producer]:
    made = Producer({"bootstrap.servers": broker.bootstrap,
                     "transactional.id": f"txn-{uuid.uuid4().hex[:8]}",
                     "transaction.timeout.ms": 10_000})
    made.init_transactions(TIMEOUT_S)
    yield made
    made.flush(TIMEOUT_S)


def test_committed_records_are_read_and_aborted_ones_never(broker, producer) -> None:
    topic = create_topic(broker.bootstrap, partitions=2)
    producer.begin_transaction()
    producer.produce(topic, b"c1", partition=0)
    producer.produce(topic, b"c2", partition=1)
    producer.commit_transaction(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, b"aborted", partition=0)
    producer.abort_transaction(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, b"c3", partition=0)
    producer.commit_transaction(TIMEOUT_S)
    reader = _consumer(broker.bootstrap, f"r-{uuid.uuid4().hex[:8]}")
    try:
        reader.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
        assert sorted(_read(reader, 3)) == [b"c1", b"c2", b"c3"]
        # Nothing else comes: the aborted record and the three markers stay unread.
        assert reader.consume(10, 2.0) == []
    finally:
        reader.close()


def test_consume_transform_produce_commits_its_input_offsets_with_its_output(
        broker, producer) -> None:
    source, sink = create_topic(broker.bootstrap), create_topic(broker.bootstrap)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(6):
        plain.produce(source, f"v{i}".encode())
    assert plain.flush(TIMEOUT_S) == 0
    group = f"ctp-{uuid.uuid4().hex[:8]}"
    processor = _consumer(broker.bootstrap, group)
    processor.assign([TopicPartition(source, 0, 0)])
    try:
        for commit in (True, False, True):
            batch = _read(processor, 3)
            producer.begin_transaction()
            for value in batch:
                producer.produce(sink, b"out-" + value)
            producer.send_offsets_to_transaction(
                processor.position([TopicPartition(source, 0)]),
                processor.consumer_group_metadata(), TIMEOUT_S)
            if commit:
                producer.commit_transaction(TIMEOUT_S)
            else:
                producer.abort_transaction(TIMEOUT_S)
                # KAFKA-17582: after an abort the processor rewinds to what its group committed.
                (committed,) = processor.committed([TopicPartition(source, 0)], TIMEOUT_S)
                assert committed.offset == 3
                processor.seek(committed)
        (committed,) = processor.committed([TopicPartition(source, 0)], TIMEOUT_S)
        assert committed.offset == 6
    finally:
        processor.close()
    reader = _consumer(broker.bootstrap, f"r-{uuid.uuid4().hex[:8]}")
    try:
        reader.assign([TopicPartition(sink, 0, 0)])
        assert _read(reader, 6) == [f"out-v{i}".encode() for i in range(6)]
        assert reader.consume(10, 2.0) == []
    finally:
        reader.close()
