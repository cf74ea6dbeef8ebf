"""Peer launchers start a real target, carry records both ways, and leave nothing running."""

from __future__ import annotations

import importlib.util
import os
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.errors import PeerStartError
from harness.cluster.peers import BrokerProcess, LibrdkafkaMockCluster, ReferenceBroker, TansuBroker
from harness.net.ports import is_accepting

VALUES = [f"record-{i}".encode() for i in range(20)]


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    futures[topic].result(timeout=10)


def round_trip(bootstrap: str, topic: str) -> list[bytes]:
    """Produce ``VALUES`` to partition 0 and read them back in assign mode."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for value in VALUES:
        producer.produce(topic, value, partition=0)
    assert producer.flush(10) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "peers-test", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        received: list[bytes] = []
        for _ in range(20):
            for message in consumer.consume(num_messages=100, timeout=1.0):
                assert message.error() is None, message.error()
                received.append(message.value())
            if len(received) >= len(VALUES):
                break
        return received
    finally:
        consumer.close()


def assert_gone(pid: int) -> None:
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_tansu_round_trip_and_cleanup() -> None:
    with TansuBroker() as tansu:
        pid = tansu.pid
        run_dir = tansu.run_dir
        topic = f"peers-{uuid.uuid4().hex[:8]}"
        create_topic(tansu.bootstrap, topic)
        assert round_trip(tansu.bootstrap, topic) == VALUES
    assert pid is not None
    assert_gone(pid)
    assert tansu.returncode == 0
    assert not run_dir.exists()


def test_tansu_given_run_dir_keeps_log_and_restarts_on_same_port(tmp_path: Path) -> None:
    tansu = TansuBroker(tmp_path / "tansu")
    with tansu:
        first_port = tansu.port
    with tansu:
        assert tansu.port == first_port
        assert tansu.is_running()
    assert not tansu.is_running()
    assert tansu.log_path.read_text().count("listening on") == 2


def test_mock_cluster_round_trip_and_cleanup() -> None:
    with LibrdkafkaMockCluster(num_brokers=3) as mock:
        addresses = mock.bootstrap.split(",")
        assert len(addresses) == 3
        assert round_trip(mock.bootstrap, f"peers-{uuid.uuid4().hex[:8]}") == VALUES
    for address in addresses:
        host, port = address.rsplit(":", 1)
        assert not is_accepting(host, int(port))
    assert not mock.is_running()


class _ExitsAtOnce(BrokerProcess):
    name = "exits-at-once"

    def _command(self) -> list[str]:
        return [sys.executable, "-c", "import sys; print('bad config key'); sys.exit(2)"]


def test_failed_start_reports_exit_code_and_log_tail() -> None:
    broker = _ExitsAtOnce(startup_timeout=10)
    with pytest.raises(PeerStartError, match=r"exit code 2\)(.|\n)*bad config key"):
        broker.start()
    assert not broker.is_running()


@pytest.mark.skipif(
    importlib.util.find_spec("reference_broker.__main__") is None,
    reason="the reference broker has no __main__ yet",
)
def test_reference_broker_round_trip_and_clean_shutdown(tmp_path: Path) -> None:
    broker = ReferenceBroker(tmp_path / "reference")
    with broker:
        pid = broker.pid
        properties = broker.properties_path.read_text()
        assert f"listeners=PLAINTEXT://{broker.bootstrap}" in properties
        topic = f"peers-{uuid.uuid4().hex[:8]}"
        create_topic(broker.bootstrap, topic)
        assert round_trip(broker.bootstrap, topic) == VALUES
    assert pid is not None
    assert_gone(pid)
    assert broker.returncode == 0, broker.log_path.read_text()[-2000:]
    assert broker.data_dir.is_dir()
