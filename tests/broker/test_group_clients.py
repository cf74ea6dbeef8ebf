"""Real clients in consumer groups: confluent-kafka (librdkafka) and kafka-python."""

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.peers import ReferenceBroker
from harness.waiting import ClusterWaitTimeout, wait_for
from tests.broker.conftest import GROUP_PROPERTIES, create_topic


def consumer(bootstrap, group, strategy="range", **extra):
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "session.timeout.ms": 1000, "heartbeat.interval.ms": 100,
                     "partition.assignment.strategy": strategy, **extra})


def assigned(c):
    return sorted((tp.topic, tp.partition) for tp in c.assignment())


def settle(consumers, expected_total, shape=None, timeout=30.0):
    """Poll all consumers until their assignments cover `expected_total` partitions once.

    With `shape` (the sorted number of partitions per consumer) the wait goes on until the
    assignment has that shape: under the cooperative protocol a member keeps what it owns while
    the group rebalances, so "each partition owned once, unchanged for 0.5 s" also holds in the
    middle of a slow rebalance (one member owning both partitions, seen once in CI).
    """
    def stable():
        for c in consumers:
            c.poll(0.05)
        owned = [tp for c in consumers for tp in assigned(c)]
        if not len(owned) == expected_total == len(set(owned)):
            return None
        if shape is not None and sorted(len(assigned(c)) for c in consumers) != shape:
            return None
        stable_since = time.monotonic()
        while time.monotonic() - stable_since < 0.5:
            for c in consumers:
                c.poll(0.05)
        if [tp for c in consumers for tp in assigned(c)] != owned:
            return None
        return [assigned(c) for c in consumers]

    try:
        return wait_for(stable, timeout, f"{expected_total} partitions owned once, shape {shape}",
                        interval=0)
    except ClusterWaitTimeout as timed_out:
        last = [assigned(c) for c in consumers]
        raise AssertionError(f"{timed_out}; last assignments {last}") from None


def produce(bootstrap, topic, partitions, per_partition=5):
    producer = Producer({"bootstrap.servers": bootstrap})
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, value=f"{p}-{i}".encode(), partition=p)
    assert producer.flush(10) == 0


def two_topics(bootstrap):
    prefix = f"t{uuid.uuid4().hex[:6]}"
    names = [f"{prefix}-t0", f"{prefix}-t1"]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, 3, 1) for n in names]).values():
        future.result(10)
    return names


@pytest.mark.parametrize("strategy,c0,c1", [
    ("range", [(0, 0), (0, 1), (1, 0), (1, 1)], [(0, 2), (1, 2)]),
    ("roundrobin", [(0, 0), (0, 2), (1, 1)], [(0, 1), (1, 0), (1, 2)]),
])
def test_the_seeds_assignor_examples(group_broker, strategy, c0, c1):
    """Two consumers, t0 and t1 with three partitions each (the seeds' example)."""
    t0, t1 = two_topics(group_broker.bootstrap)
    group = f"g-{uuid.uuid4().hex[:6]}"
    first = consumer(group_broker.bootstrap, group, strategy, **{"client.id": "C0"})
    first.subscribe([t0, t1])
    settle([first], 6)
    second = consumer(group_broker.bootstrap, group, strategy, **{"client.id": "C1"})
    second.subscribe([t0, t1])
    try:
        result = settle([first, second], 6)
        names = {t0: 0, t1: 1}
        as_indexes = sorted([sorted((names[t], p) for t, p in r) for r in result])
        assert as_indexes == sorted([c0, c1])
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_join_leave_and_more_consumers_than_partitions(group_broker, strategy):
    topic = create_topic(group_broker.bootstrap, partitions=2)
    produce(group_broker.bootstrap, topic, 2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    consumers = [consumer(group_broker.bootstrap, group, strategy) for _ in range(3)]
    try:
        for c in consumers:
            c.subscribe([topic])
        shares = settle(consumers, 2, shape=[0, 1, 1])
        assert sorted(len(s) for s in shares) == [0, 1, 1]
        consumers.pop().close()
        consumers.pop().close()
        assert settle(consumers, 2) == [[(topic, 0), (topic, 1)]]
    finally:
        for c in consumers:
            c.close()


CRASHING_CONSUMER = textwrap.dedent("""
    import sys
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                  "session.timeout.ms": 1000, "heartbeat.interval.ms": 100,
                  "auto.offset.reset": "earliest"})
    c.subscribe([sys.argv[3]])
    while True:
        c.poll(0.1)
        if c.assignment():
            print("assigned", flush=True)
""")


def test_a_crashed_member_is_evicted_after_its_session_timeout(group_broker):
    topic = create_topic(group_broker.bootstrap, partitions=2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    crashing = subprocess.Popen([sys.executable, "-c", CRASHING_CONSUMER,
                                 group_broker.bootstrap, group, topic],
                                stdout=subprocess.PIPE, text=True)
    survivor = consumer(group_broker.bootstrap, group)
    try:
        assert crashing.stdout.readline().strip() == "assigned"
        survivor.subscribe([topic])
        assert len(settle([survivor], 1)[0]) == 1
        os.kill(crashing.pid, signal.SIGKILL)
        crashing.wait(10)
        started = time.monotonic()
        assert settle([survivor], 2) == [[(topic, 0), (topic, 1)]]
        assert time.monotonic() - started < 15
    finally:
        if crashing.poll() is None:
            crashing.kill()
            crashing.wait(10)
        crashing.stdout.close()
        survivor.close()


def test_committed_offsets_survive_a_broker_restart(tmp_path):
    broker = ReferenceBroker(tmp_path / "b", properties=GROUP_PROPERTIES)
    broker.start()
    try:
        topic = create_topic(broker.bootstrap, partitions=2)
        produce(broker.bootstrap, topic, 2)
        group = f"g-{uuid.uuid4().hex[:6]}"
        c = consumer(broker.bootstrap, group)
        c.subscribe([topic])
        settle([c], 2)
        c.commit(offsets=[TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 4)],
                 asynchronous=False)
        c.close()
        broker.stop()
        broker.start()
        again = consumer(broker.bootstrap, group)
        try:
            committed = again.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)],
                                        timeout=20)
            assert [tp.offset for tp in committed] == [3, 4]
            again.subscribe([topic])
            msg = None
            deadline = time.monotonic() + 10
            while msg is None and time.monotonic() < deadline:
                msg = again.poll(0.2)
            assert msg is not None and msg.offset() in (3, 4)
        finally:
            again.close()
    finally:
        broker.stop()


def test_kafka_python_group_consumers(group_broker):
    from kafka import KafkaConsumer

    topic = create_topic(group_broker.bootstrap, partitions=2)
    produce(group_broker.bootstrap, topic, 2, per_partition=3)
    group = f"g-{uuid.uuid4().hex[:6]}"
    consumers = [KafkaConsumer(topic, bootstrap_servers=group_broker.bootstrap, group_id=group,
                               auto_offset_reset="earliest", enable_auto_commit=False,
                               session_timeout_ms=1000, heartbeat_interval_ms=100,
                               consumer_timeout_ms=200) for _ in range(2)]
    try:
        seen = set()
        deadline = time.monotonic() + 30
        while (len(seen) < 6 or any(len(c.assignment()) != 1 for c in consumers)) \
                and time.monotonic() < deadline:
            for c in consumers:
                for records in c.poll(timeout_ms=100).values():
                    seen.update((r.partition, r.offset) for r in records)
        assert len(seen) == 6
        settled_at = group_broker.log_path.read_text().count(f"rebalance group {group} ")
        for _ in range(10):  # a quiet group stays quiet: no rebalance storm
            for c in consumers:
                c.poll(timeout_ms=100)
        assert group_broker.log_path.read_text().count(f"rebalance group {group} ") \
            == settled_at <= 3
        assert sorted(tp.partition for c in consumers for tp in c.assignment()) == [0, 1]
        for c in consumers:
            c.commit()
        check = KafkaConsumer(bootstrap_servers=group_broker.bootstrap, group_id=group,
                              enable_auto_commit=False)
        from kafka import TopicPartition as KTopicPartition

        assert [check.committed(KTopicPartition(topic, p)) for p in (0, 1)] == [3, 3]
        check.close()
    finally:
        for c in consumers:
            c.close()


def test_admin_client_sees_and_deletes_groups(group_broker):
    from confluent_kafka import ConsumerGroupTopicPartitions

    topic = create_topic(group_broker.bootstrap, partitions=2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    member = consumer(group_broker.bootstrap, group)
    member.subscribe([topic])
    settle([member], 2)
    member.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    admin = AdminClient({"bootstrap.servers": group_broker.bootstrap})
    try:
        listed = admin.list_consumer_groups().result(10)
        assert group in {g.group_id for g in listed.valid}
        described = admin.describe_consumer_groups([group])[group].result(10)
        assert described.state.name == "STABLE" and described.partition_assignor == "range"
        assert sorted(tp.partition for m in described.members
                      for tp in m.assignment.topic_partitions) == [0, 1]
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])
        offsets = admin.list_consumer_group_offsets([request])[group].result(10)
        assert [tp.offset for tp in offsets.topic_partitions] == [1]
        in_use = admin.delete_consumer_groups([group])[group]
        with pytest.raises(KafkaException, match="NON_EMPTY_GROUP|not empty"):
            in_use.result(10)
    finally:
        member.close()
    admin.delete_consumer_groups([group])[group].result(10)
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}
