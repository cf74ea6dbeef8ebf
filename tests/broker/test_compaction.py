"""Compacted topics on a running broker: the cleaner runs, and __consumer_offsets is one."""

import contextlib
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from harness.cluster.peers import ReferenceBroker
from harness.raw_client import RawClient
from harness.waiting import wait_for

from .conftest import create_topic


def read_all(bootstrap, topic):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    try:
        deadline = time.monotonic() + 10
        # Up to the last offset written (4): a slow broker may answer in more than one fetch.
        while time.monotonic() < deadline and (not out or out[-1][0] < 4):
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert not msg.error()
            out.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    return out


def test_the_cleaner_compacts_a_running_topic(tmp_path):
    props = {"log.cleaner.backoff.ms": 100}
    with ReferenceBroker(tmp_path / "b", properties=props) as broker:
        # One batch per segment: every write but the last lands in a cleanable segment. The
        # cleaner runs twice: once before b/2's segment rolls (removing a/1 only), once after.
        # What the first pass leaves dirty is then a third of the log, under
        # Kafka's default min.cleanable.dirty.ratio of 0.5 (Kafka would wait too; measured: with
        # the default the second pass never comes), so the topic sets a low ratio.
        topic = create_topic(broker.bootstrap, config={"cleanup.policy": "compact",
                                                       "segment.bytes": "100",
                                                       "min.cleanable.dirty.ratio": "0.01"})
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})

        def write(*records: tuple[bytes, bytes]) -> None:
            for key, value in records:
                producer.produce(topic, key=key, value=value)
                producer.flush(10)

        write((b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"b", b"2"))
        wait_for(lambda: "compacted" in broker.log_path.read_text(), 20,
                 "the cleaner's first pass")
        write((b"c", b"1"))
        # The cleaner runs every log.cleaner.backoff.ms: the compacted log is awaited.
        compacted = [(2, b"a", b"2"), (3, b"b", b"2"), (4, b"c", b"1")]
        seen: list = []

        def read_compacted() -> bool:
            seen[:] = read_all(broker.bootstrap, topic)
            return seen == compacted

        with contextlib.suppress(TimeoutError):  # the assertion below shows what was read
            wait_for(read_compacted, 30, "the log to hold only each key's latest value",
                     interval=0.5)
        assert seen == compacted


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
