"""confluent-kafka (librdkafka) against the reference broker process."""

import time

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from .conftest import create_topic


def produce(bootstrap, topic, values, **config):
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    delivered = []
    errors = []

    def on_delivery(err, msg):
        (errors if err else delivered).append(err or (msg.partition(), msg.offset()))

    for i, value in enumerate(values):
        producer.produce(topic, value=value, key=str(i).encode(), on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert errors == []
    return delivered


def consume(bootstrap, topic, count, offset=OFFSET_BEGINNING, partition=0, timeout=20):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, offset)])
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        for msg in consumer.consume(num_messages=1000, timeout=0.5):
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise AssertionError(msg.error())
            out.append(msg)
    consumer.close()
    return out


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_produce_each_acks_then_consume(broker, topic, acks):
    values = [f"v{i}".encode() for i in range(500)]
    delivered = produce(broker.bootstrap, topic, values, acks=acks)
    assert len(delivered) == 500
    if acks != "0":  # acks=0 gets no offsets back
        assert sorted(o for _, o in delivered) == list(range(500))
    got = consume(broker.bootstrap, topic, 500)
    assert [m.value() for m in got] == values
    assert [m.offset() for m in got] == list(range(500))


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_each_compression_codec_round_trips(broker, topic, codec):
    values = [(f"record-{i}-" * 5).encode() for i in range(300)]
    produce(broker.bootstrap, topic, values, **{"compression.type": codec, "acks": "all"})
    got = consume(broker.bootstrap, topic, 300)
    assert [m.value() for m in got] == values


def test_consume_from_end_sees_only_new_records(broker, topic):
    produce(broker.bootstrap, topic, [b"old"] * 10)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
    consumer.consume(num_messages=10, timeout=2)  # establish the position at the end
    produce(broker.bootstrap, topic, [b"new1", b"new2"])
    seen = []
    deadline = time.monotonic() + 15
    while len(seen) < 2 and time.monotonic() < deadline:
        seen += [m for m in consumer.consume(num_messages=10, timeout=0.5) if not m.error()]
    consumer.close()
    assert [(m.offset(), m.value()) for m in seen] == [(10, b"new1"), (11, b"new2")]


def test_consume_from_a_timestamp(broker, topic):
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    base = 1_700_000_000_000
    for i in range(20):
        producer.produce(topic, value=f"v{i}".encode(), timestamp=base + i * 1000)
        producer.flush(10)  # one batch each, so the time index has something to find
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    (found,) = consumer.offsets_for_times([TopicPartition(topic, 0, base + 12_500)], timeout=10)
    assert found.offset == 13
    (past,) = consumer.offsets_for_times([TopicPartition(topic, 0, base + 99_000)], timeout=10)
    assert past.offset == -1  # nothing at or after: OFFSET_END
    consumer.close()
    got = consume(broker.bootstrap, topic, 7, offset=found.offset)
    assert [m.value() for m in got] == [f"v{i}".encode() for i in range(13, 20)]
    assert got[0].timestamp()[1] == base + 13_000


def test_idempotent_producer_delivers_exactly_once_in_order(broker, topic):
    values = [f"idem-{i}".encode() for i in range(2000)]
    delivered = produce(broker.bootstrap, topic, values, **{
        "enable.idempotence": True, "max.in.flight.requests.per.connection": 5,
        "retries": 10, "linger.ms": 1, "batch.num.messages": 50})
    assert sorted(o for _, o in delivered) == list(range(2000))
    got = consume(broker.bootstrap, topic, 2000)
    assert [m.value() for m in got] == values


def test_admin_create_describe_alter_delete(broker, admin):
    name = create_topic(broker.bootstrap, partitions=3, config={"retention.ms": "3600000"})
    md = admin.list_topics(timeout=10).topics[name]
    assert sorted(md.partitions) == [0, 1, 2]
    resource = ConfigResource("topic", name)
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    assert configs["retention.ms"].value == "3600000"
    assert configs["cleanup.policy"].value == "delete"
    change = ConfigResource("topic", name, incremental_configs=[
        ConfigEntry("max.message.bytes", "2048", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([change])[change].result(timeout=10)
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    assert configs["max.message.bytes"].value == "2048"
    admin.create_partitions([NewPartitions(name, 5)])[name].result(timeout=10)
    assert len(admin.list_topics(timeout=10).topics[name].partitions) == 5
    admin.delete_topics([name])[name].result(timeout=10)
    assert name not in admin.list_topics(timeout=10).topics


@pytest.mark.parametrize("new_topic,error", [
    (NewTopic("bad name!", 1, 1), 17),  # INVALID_TOPIC_EXCEPTION (librdkafka: TOPIC_EXCEPTION)
    (NewTopic("zero-partitions", 0, 1), 37),  # INVALID_PARTITIONS
    (NewTopic("rf-too-big", 1, 3), 38),  # INVALID_REPLICATION_FACTOR
    (NewTopic("bad-config", 1, 1, config={"retention.ms": "soon"}), 40),  # INVALID_CONFIG
])
def test_create_topic_errors(admin, new_topic, error):
    future = admin.create_topics([new_topic])[new_topic.topic]
    with pytest.raises(Exception) as info:
        future.result(timeout=10)
    assert info.value.args[0].code() == error


def test_create_existing_topic_and_validate_only(broker, admin, topic):
    with pytest.raises(Exception) as info:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=10)
    assert info.value.args[0].name() == "TOPIC_ALREADY_EXISTS"
    admin.create_topics([NewTopic("only-validated", 1, 1)],
                        validate_only=True)["only-validated"].result(timeout=10)
    assert "only-validated" not in admin.list_topics(timeout=10).topics


def test_auto_topic_creation_on_produce(broker):
    produce(broker.bootstrap, "auto-created-topic", [b"x"], acks="all")
    got = consume(broker.bootstrap, "auto-created-topic", 1)
    assert got[0].value() == b"x"


def test_message_too_large_is_rejected(broker):
    name = create_topic(broker.bootstrap, config={"max.message.bytes": "1000"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 100000,
                         "retries": 0})
    errors = []
    producer.produce(name, value=b"x" * 5000, on_delivery=lambda e, m: errors.append(e))
    producer.flush(10)
    assert errors[0].name() == "MSG_SIZE_TOO_LARGE"
