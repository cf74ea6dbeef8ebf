"""The kfake peer: franz-go's fake cluster, built from ``ci/kfake`` by set-up, started as a
process of several brokers that serves real clients — transactions included — and leaves
nothing behind. Without the build these tests fail with the command that makes it: a skip
would hide a set-up that did not run."""

from __future__ import annotations

import socket
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from harness.cluster.errors import PeerStartError, TargetError
from harness.cluster.options import TargetName
from harness.cluster.peers import KfakeCluster
from harness.cluster.targets import start_target
from harness.net.ports import is_accepting
from harness.vendor import VENDOR_ENV
from harness.waiting import wait_for
from tests.cluster.test_peers import VALUES, assert_gone, create_topic, round_trip

TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def kfake() -> Iterator[KfakeCluster]:
    """Three kfake brokers for the tests that only use them (a start takes well under 1 s)."""
    with KfakeCluster(brokers=3, properties={"group.max.size": 6}) as cluster:
        yield cluster


def test_kfake_serves_a_round_trip_on_three_brokers_and_stops_cleanly() -> None:
    with KfakeCluster(brokers=3) as kfake:
        pid, run_dir = kfake.pid, kfake.run_dir
        addresses = kfake.bootstrap.split(",")
        assert len(set(addresses)) == 3
        metadata = AdminClient({"bootstrap.servers": kfake.bootstrap}).list_topics(timeout=10)
        assert sorted(f"{b.host}:{b.port}" for b in metadata.brokers.values()) == sorted(addresses)
        topic = f"kfake-{uuid.uuid4().hex[:8]}"
        create_topic(kfake.bootstrap, topic)
        assert round_trip(kfake.bootstrap, topic) == VALUES
    assert pid is not None
    assert_gone(pid)
    assert kfake.returncode == 0  # it stopped on SIGTERM, not by the SIGKILL that follows
    assert not run_dir.exists()
    for address in addresses:
        host, port = address.rsplit(":", 1)
        assert not is_accepting(host, int(port))


def test_kfake_restarts_on_its_ports_with_a_given_run_dir(tmp_path: Path) -> None:
    kfake = KfakeCluster(tmp_path / "kfake", brokers=2)
    with kfake:
        first = kfake.bootstrap
    with kfake:
        assert kfake.bootstrap == first
    assert not kfake.is_running()
    log = kfake.log_path.read_text()
    assert log.count("kfake: 2 brokers listening on") == 2
    assert log.count("kfake: stopped on terminated") == 2


def _read_committed(bootstrap: str, topic: str, until: bytes) -> list[bytes]:
    """Every value a read_committed consumer reads from partition 0 until it has read
    ``until`` (the last committed value, written after the aborted ones)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    read: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])

        def more() -> bool:
            for message in consumer.consume(10, 0.5):
                assert message.error() is None, message.error()
                read.append(message.value())
            return until in read

        wait_for(more, TIMEOUT_S, f"a read_committed consumer to read {until!r}", retry_on=())
        return read
    finally:
        consumer.close()


def test_kfake_commits_are_read_committed_and_aborts_never(kfake: KfakeCluster) -> None:
    topic = f"kfake-txn-{uuid.uuid4().hex[:8]}"
    create_topic(kfake.bootstrap, topic)
    producer = Producer({"bootstrap.servers": kfake.bootstrap,
                         "transactional.id": f"txn-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(TIMEOUT_S)
    for values, commit in (([b"c-1", b"c-2"], True), ([b"a-1", b"a-2"], False),
                           ([b"c-3"], True)):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value, partition=0)
        # Flushed first: librdkafka drops what it has not sent when it aborts, and the aborted
        # values must reach kfake's log for the broker to be what keeps them unread.
        assert producer.flush(TIMEOUT_S) == 0
        (producer.commit_transaction if commit else producer.abort_transaction)(TIMEOUT_S)
    assert _read_committed(kfake.bootstrap, topic, until=b"c-3") == [b"c-1", b"c-2", b"c-3"]


def test_kfake_is_given_only_the_broker_keys_it_reads(kfake: KfakeCluster) -> None:
    """``group.max.size`` reaches kfake; a key it has no use for is not passed, so it does not
    appear among its broker configs as a setting it would then ignore."""
    resource = ConfigResource(ResourceType.BROKER, "0")
    admin = AdminClient({"bootstrap.servers": kfake.bootstrap})
    configs = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    assert configs["group.max.size"].value == "6"
    with KfakeCluster(properties={"group.initial.rebalance.delay.ms": 0}) as other:
        admin = AdminClient({"bootstrap.servers": other.bootstrap})
        configs = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    assert "group.initial.rebalance.delay.ms" not in configs
    assert configs["group.max.size"].value == "2147483647"


def test_a_kfake_target_that_crashes_is_restarted_and_the_test_it_died_in_is_told(
        tmp_path: Path) -> None:
    """kfake panics on a request whose API key it does not know (a finding: Kafka answers by
    closing that one connection), and its cluster dies with it. The target's reset between
    tests starts it again and raises, with the panic, for the test that killed it."""
    target = start_target(TargetName.KFAKE, brokers=2, run_dir=tmp_path / "target")
    try:
        bootstrap = target.bootstrap
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as connection:
            body = struct.pack(">hhih", 32767, 0, 1, -1)  # key 32767, v0, correlation 1, no id
            connection.sendall(struct.pack(">i", len(body)) + body)
        wait_for(lambda: not is_accepting(host, int(port)), TIMEOUT_S, "kfake to die")
        with pytest.raises(TargetError, match=r"(?s)exited during the test \(exit code 2\).*"
                                              r"panic: runtime error"):
            target.reset()
        assert target.bootstrap == bootstrap
        topic = f"kfake-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic)
        assert round_trip(bootstrap, topic) == VALUES
        target.reset()  # running: nothing to do
    finally:
        target.close()


def test_kfake_without_its_build_fails_naming_the_command_that_builds_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VENDOR_ENV, str(tmp_path / "vendor"))
    kfake = KfakeCluster()
    with pytest.raises(PeerStartError) as failed:
        kfake.start()
    message = str(failed.value)
    assert f"not built at {tmp_path / 'vendor' / 'bin' / 'kfake'}" in message
    assert "bash ci/fetch_vendor.sh" in message and "ci/kfake" in message
    assert kfake.pid is None
    with pytest.raises(RuntimeError, match="has not been started"):
        kfake.run_dir  # noqa: B018 - its temporary run directory was removed
