"""The controller's ZooKeeper operations: admin requests, topic removal, data watches."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from reference_broker.log.topic_partition import TopicPartition
from reference_broker.zk.broker_znodes import BrokerInfo, EndPoint
from reference_broker.zk.kafka_zk_client import ControllerMovedError, KafkaZkClient
from reference_broker.zk.topic_znodes import LeaderIsrAndControllerEpoch, TopicAssignment

Factory = Callable[[], KafkaZkClient]
TP = TopicPartition("orders", 0)
STATE = LeaderIsrAndControllerEpoch(1, 0, (1,), 1)


def test_brokers_come_with_their_epochs(zk_client: Factory) -> None:
    client = zk_client()
    epoch = client.register_broker(BrokerInfo(3, (EndPoint("PLAINTEXT", "127.0.0.1", 9),)))
    found = client.get_all_brokers_and_epochs()
    assert list(found) == [3] and found[3][1] == epoch
    assert client.get_broker_and_epoch(4) is None


def test_topic_znodes_are_deleted_together_and_fenced(zk_client: Factory) -> None:
    client = zk_client()
    epoch = client.try_to_become_controller(1)
    client.create_topic_assignment("orders", TopicAssignment.of({0: [1], 1: [1]}))
    client.create_partition_state(TP, STATE)
    client.create_partition_state(TopicPartition("orders", 1), STATE)
    assert set(client.get_topic_partition_states("orders")) == {0, 1}
    client.set_topic_config("orders", {"retention.ms": "1"})
    client.create_delete_topic_request("orders")
    assert client.get_delete_topic_requests() == ["orders"]

    with pytest.raises(ControllerMovedError):
        client.delete_topic_znodes("orders", controller_epoch_zk_version=epoch.zk_version + 1)
    assert client.get_all_topics() == ["orders"]

    client.delete_topic_znodes("orders", controller_epoch_zk_version=epoch.zk_version)
    assert client.get_all_topics() == []
    assert client.get_topic_config("orders") == {}
    assert client.get_delete_topic_requests() == []
    assert client.get_topic_partition_states("orders") == {}


def test_reassignment_request_is_rewritten_then_deleted(zk_client: Factory) -> None:
    client = zk_client()
    other = TopicPartition("orders", 1)
    client.create_partition_reassignment({TP: [1, 2], other: [2]})
    assert client.get_partition_reassignment() == {TP: (1, 2), other: (2,)}
    client.set_or_delete_partition_reassignment({other: [2]})
    assert client.get_partition_reassignment() == {other: (2,)}
    client.set_or_delete_partition_reassignment({})
    assert client.get_partition_reassignment() is None


def test_preferred_election_request_round_trip(zk_client: Factory) -> None:
    client = zk_client()
    assert client.get_preferred_replica_election() is None
    client.create_preferred_replica_election([TP])
    assert client.get_preferred_replica_election() == frozenset({TP})
    client.delete_preferred_replica_election()
    assert client.get_preferred_replica_election() is None


def test_config_change_notifications_are_listed_oldest_first(zk_client: Factory) -> None:
    client = zk_client()
    client.set_topic_config("a", {"x": "1"})
    client.set_topic_config("b", {"x": "2"})
    changes = client.get_config_change_notifications()
    assert [(kind, name) for _, kind, name in changes] == [("topics", "a"), ("topics", "b")]
    assert changes[0][0] < changes[1][0]


def test_data_watch_sees_creation_change_and_deletion_until_it_stops(zk_client: Factory) -> None:
    client, writer = zk_client(), zk_client()
    seen: list[bytes | None] = []
    changed = threading.Event()

    def callback(data: bytes | None) -> bool | None:
        seen.append(data)
        changed.set()
        return False if data == b"stop" else None

    client.watch_data("/admin/preferred_replica_election", callback)
    assert changed.wait(5)
    for expected in (b"{}", b"stop"):
        changed.clear()
        if expected == b"{}":
            writer._zk.create("/admin/preferred_replica_election", expected)
        else:
            writer._zk.set("/admin/preferred_replica_election", expected)
        assert changed.wait(5)
    writer._zk.delete("/admin/preferred_replica_election")
    changed.clear()
    assert not changed.wait(0.5)
    assert seen == [None, b"{}", b"stop"]
