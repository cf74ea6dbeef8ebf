"""Compacted topics on a running broker: the cleaner runs, and __consumer_offsets is one."""

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from harness.cluster.peers import ReferenceBroker
from harness.raw_client import RawClient

from .conftest import create_topic


def read_all(bootstrap, topic):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                if out:
                    break
                continue
            assert not msg.error()
            out.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    return out


def test_the_cleaner_compacts_a_running_topic(tmp_path):
    props = {"log.cleaner.backoff.ms": 100}
    with ReferenceBroker(tmp_path / "b", properties=props) as broker:
        # One batch per segment: every write but the last lands in a cleanable segment.
        topic = create_topic(broker.bootstrap, config={"cleanup.policy": "compact",
                                                       "segment.bytes": "100"})
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        for key, value in [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"b", b"2"),
                           (b"c", b"1")]:
            producer.produce(topic, key=key, value=value)
            producer.flush(10)
        deadline = time.monotonic() + 10
        while "compacted" not in broker.log_path.read_text():
            assert time.monotonic() < deadline, "the cleaner never ran"
            time.sleep(0.1)
        assert read_all(broker.bootstrap, topic) == [(2, b"a", b"2"), (3, b"b", b"2"),
                                                     (4, b"c", b"1")]


def test_consumer_offsets_is_an_internal_compacted_topic(group_broker):
    with RawClient(group_broker.host, group_broker.port) as raw:
        raw.request(10, 3, {"key": "g", "key_type": 0})
    topic_name = "__consumer_offsets"
    admin = AdminClient({"bootstrap.servers": group_broker.bootstrap})
    metadata = admin.list_topics(topic_name, timeout=10).topics[topic_name]
    assert len(metadata.partitions) == 50
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["cleanup.policy"].value == "compact"
