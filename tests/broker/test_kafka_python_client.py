"""kafka-python, an independent client implementation, against the same broker."""

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic


@pytest.mark.parametrize("acks,codec", [(1, None), ("all", "gzip"), (0, None)])
def test_produce_and_consume(broker, acks, codec):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    name = f"kp-{acks}-{codec}"
    admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=acks,
                             compression_type=codec, linger_ms=5)
    futures = [producer.send(name, value=f"v{i}".encode(), partition=i % 2) for i in range(200)]
    producer.flush(timeout=20)
    metadata = [f.get(timeout=10) for f in futures]
    producer.close()
    if acks != 0:
        assert sorted(m.offset for m in metadata if m.partition == 0) == list(range(100))
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=5000)
    partitions = [TopicPartition(name, 0), TopicPartition(name, 1)]
    consumer.assign(partitions)
    consumer.seek_to_beginning()
    got = sorted((m.partition, m.offset, m.value) for m in consumer)
    end = consumer.end_offsets(partitions)
    consumer.close()
    assert len(got) == 200
    assert {m[2] for m in got} == {f"v{i}".encode() for i in range(200)}
    assert end == {partitions[0]: 100, partitions[1]: 100}


def test_offsets_for_times_and_beginning(broker):
    name = "kp-times"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    base = 1_600_000_000_000
    for i in range(10):
        producer.send(name, value=b"x", timestamp_ms=base + i * 10)
        producer.flush()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tp = TopicPartition(name, 0)
    found = consumer.offsets_for_times({tp: base + 45})
    assert found[tp].offset == 5 and found[tp].timestamp == base + 50
    assert consumer.beginning_offsets([tp]) == {tp: 0}
    consumer.close()
