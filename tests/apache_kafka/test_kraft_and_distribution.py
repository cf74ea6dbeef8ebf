"""Apache Kafka 4.x in KRaft mode as a target, and where the harness finds Kafka's jars."""

from __future__ import annotations

import shutil

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.apache_kafka import KAFKA_HOME_ENV, KafkaDistribution
from harness.cluster.errors import PeerStartError
from harness.cluster.kraft_state import KraftState
from harness.cluster.targets import start_target
from harness.vendor import VENDOR_ENV, vendor_dir
from harness.waiting import wait_for


def test_one_kraft_node_serves_clients_and_shows_its_state_through_the_protocol(tmp_path):
    """One combined broker+controller node (a quorum of one), formatted on first start:
    CreateTopics, acks=all produce and a read back; DescribeQuorum names it the active
    controller and Metadata the leader, and asking about a topic does not create it."""
    target = start_target("apache-kafka-kraft", brokers=1, run_dir=tmp_path / "kraft")
    try:
        assert target.kind == "apache-kafka-kraft" and target.version.startswith("4.")
        assert target.missing("multi_broker") is not None and target.missing("faults") is None
        admin = AdminClient({"bootstrap.servers": target.bootstrap})
        admin.create_topics([NewTopic("kraft", 1, 1)])["kraft"].result(30)
        producer = Producer({"bootstrap.servers": target.bootstrap, "acks": "all"})
        for i in range(20):
            producer.produce("kraft", f"v{i}".encode())
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": "kraft"})
        consumer.assign([TopicPartition("kraft", 0, 0)])
        values = [m.value() for m in consumer.consume(20, timeout=20)]
        consumer.close()
        assert values == [f"v{i}".encode() for i in range(20)]

        nodes = target.require_nodes()
        state = nodes.reads
        assert isinstance(state, KraftState)
        quorum = state.quorum()
        assert quorum.leader_id == 1 and [v.node_id for v in quorum.voters] == [1]
        assert state.controller_id() == 1 and state.controller_epoch() == quorum.leader_epoch
        assert state.registered_broker_ids() == [1]
        assert state.partition_state("kraft", 0) == {
            "leader": 1, "isr": [1], "replicas": [1], "leader_epoch": 0, "elr": [],
            "last_known_elr": []}
        assert state.leader("kraft", 0) == 1
        assert state.partition_state("no-such-topic", 0) is None
        # Asking must not have created it. The controller handles topic creations in order, so
        # once a topic created after the question is listed, an auto-creation would be too.
        # KRaft answers CreateTopics once the controller has committed the topic, which the
        # broker's metadata may show a moment later: wait for the listing, not the answer.
        admin.create_topics([NewTopic("after-the-question", 1, 1)])["after-the-question"] \
            .result(30)
        def listing_it() -> dict | None:
            topics = admin.list_topics(timeout=10).topics
            return topics if "after-the-question" in topics else None

        listed = wait_for(listing_it, 30, "the broker to list the topic created after it")
        assert "no-such-topic" not in listed
        assert (tmp_path / "kraft" / "broker-1" / "data" / "meta.properties").is_file()
    finally:
        target.close()


def test_kafka_home_points_at_a_distribution_of_the_right_line(tmp_path, monkeypatch):
    """``$KAFKA_HOME`` with ``libs/`` serves the kind of its own line; another line's
    distribution is ignored for this one, and with neither the error says how to get one."""
    vendored = KafkaDistribution.find("3.9")
    home = tmp_path / "kafka"
    (home / "libs").mkdir(parents=True)
    core = next(vendored.libs.glob("kafka_2.13-*.jar"))
    shutil.copy(core, home / "libs" / core.name)
    monkeypatch.setenv(KAFKA_HOME_ENV, str(home))
    assert KafkaDistribution.find("3.9") == KafkaDistribution(home / "libs", vendored.version)
    assert KafkaDistribution.find("4").libs == vendor_dir() / "kafka-4" / "libs"

    monkeypatch.setenv(VENDOR_ENV, str(tmp_path / "empty-vendor"))
    with pytest.raises(PeerStartError) as refused:
        KafkaDistribution.find("4")
    message = str(refused.value)
    assert "no Apache Kafka 4 jars" in message and "ci/fetch_vendor.sh" in message
    assert f"${KAFKA_HOME_ENV}={home} holds no Kafka 4" in message
