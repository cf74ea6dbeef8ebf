"""KafkaZkClient against a real ZooKeeper: ephemerals, races, versions, watches, expiry."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import pytest
from kazoo.client import KazooClient

from harness.net.ports import free_port
from reference_broker.log.topic_partition import TopicPartition
from reference_broker.zk.broker_znodes import BrokerInfo, EndPoint
from reference_broker.zk.kafka_zk_client import (
    BrokerIdInUseError,
    ControllerMovedError,
    KafkaZkClient,
    ZooKeeperUnavailableError,
)
from reference_broker.zk.topic_zk import PartitionStateConflictError, TopicExistsError
from reference_broker.zk.topic_znodes import LeaderIsrAndControllerEpoch, TopicAssignment
from reference_broker.zk.zk_json import is_base64_uuid

Factory = Callable[[], KafkaZkClient]
TP = TopicPartition("orders", 0)


def broker(broker_id: int, port: int = 9092) -> BrokerInfo:
    return BrokerInfo(broker_id, (EndPoint("PLAINTEXT", "127.0.0.1", port),))


def eventually(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def raw(zk_connect: str) -> KazooClient:
    """A plain kazoo client on the test's chroot, to look at the bytes Kafka tools would see."""
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=10)
    return client


def test_start_creates_the_chroot_and_kafkas_persistent_paths(zk_client: Factory,
                                                              zk_connect: str) -> None:
    zk_client()
    client = raw(zk_connect)
    try:
        assert set(client.get_children("/")) >= {"brokers", "config", "admin",
                                                 "isr_change_notification"}
        assert set(client.get_children("/brokers")) >= {"ids", "topics"}
    finally:
        client.stop()
        client.close()


def test_registration_is_visible_and_ephemeral(zk_client: Factory, zk_connect: str) -> None:
    first, observer = zk_client(), zk_client()
    broker_epoch = first.register_broker(broker(1))
    assert broker_epoch > 0
    assert observer.get_broker_ids() == [1]
    registered = observer.get_broker(1)
    assert registered is not None and registered.endpoints == broker(1).endpoints
    assert abs(registered.timestamp_ms - time.time() * 1000) < 60_000

    client = raw(zk_connect)
    try:
        data, stat = client.get("/brokers/ids/1")
        assert stat.ephemeralOwner == first.session_id
        assert json.loads(data)["endpoints"] == ["PLAINTEXT://127.0.0.1:9092"]
    finally:
        client.stop()
        client.close()

    first.close()
    assert observer.get_broker_ids() == []
    assert observer.get_broker(1) is None


def test_duplicate_broker_id_is_rejected_by_name(zk_client: Factory) -> None:
    first, second = zk_client(), zk_client()
    first.register_broker(broker(5))
    with pytest.raises(BrokerIdInUseError, match=r"broker\.id 5 is already registered"):
        second.register_broker(broker(5, port=9093))
    assert first.register_broker(broker(5)) > 0  # the owner may register again
    second.register_broker(broker(6, port=9093))
    assert sorted(first.get_all_brokers()) == [5, 6]


def test_cluster_id_is_created_once(zk_client: Factory, zk_connect: str) -> None:
    first, second = zk_client(), zk_client()
    assert first.get_cluster_id() is None
    cluster_id = first.get_or_create_cluster_id()
    assert len(cluster_id) == 22 and is_base64_uuid(cluster_id)
    assert second.get_or_create_cluster_id("AAAAAAAAAAAAAAAAAAAAAA") == cluster_id
    first.close()
    assert zk_client().get_or_create_cluster_id() == cluster_id
    client = raw(zk_connect)
    try:
        assert json.loads(client.get("/cluster/id")[0]) == {"version": "1", "id": cluster_id}
    finally:
        client.stop()
        client.close()


def test_only_one_of_two_racing_brokers_becomes_controller(zk_client: Factory) -> None:
    clients = {1: zk_client(), 2: zk_client()}
    barrier = threading.Barrier(2)
    results = {}

    def attempt(broker_id: int) -> None:
        barrier.wait()
        results[broker_id] = clients[broker_id].try_to_become_controller(broker_id)

    threads = [threading.Thread(target=attempt, args=(b,)) for b in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [b for b, epoch in results.items() if epoch is not None]
    assert len(winners) == 1
    winner = winners[0]
    assert results[winner].epoch == 1
    assert clients[1].get_controller_id() == winner
    assert clients[2].get_controller_epoch() == results[winner]


def test_controller_failover_increments_the_epoch_by_one(zk_client: Factory) -> None:
    first, second = zk_client(), zk_client()
    won = first.try_to_become_controller(1)
    assert won is not None and won.epoch == 1
    assert second.try_to_become_controller(2) is None
    assert second.get_controller_id() == 1

    first.close()
    assert second.get_controller_id() is None
    taken = second.try_to_become_controller(2)
    assert taken is not None and taken.epoch == 2
    assert second.get_controller_id() == 2
    assert zk_client().try_to_become_controller(3) is None


def test_a_deposed_controller_cannot_write(zk_client: Factory) -> None:
    old, new = zk_client(), zk_client()
    state = LeaderIsrAndControllerEpoch(1, 0, (1, 2), 1)
    old_epoch = old.try_to_become_controller(1)
    assert old_epoch is not None
    version = old.create_partition_state(TP, state,
                                         controller_epoch_zk_version=old_epoch.zk_version)
    old.delete_controller(old_epoch.zk_version)
    new_epoch = new.try_to_become_controller(2)
    assert new_epoch is not None and new_epoch.epoch == 2

    with pytest.raises(ControllerMovedError):
        old.update_partition_state(TP, state, version,
                                   controller_epoch_zk_version=old_epoch.zk_version)
    with pytest.raises(ControllerMovedError):
        old.delete_controller(old_epoch.zk_version)
    assert new.get_controller_id() == 2
    new.update_partition_state(TP, LeaderIsrAndControllerEpoch(2, 1, (2,), 2), version,
                               controller_epoch_zk_version=new_epoch.zk_version)


def test_partition_state_updates_are_conditional_on_the_version(zk_client: Factory) -> None:
    leader, controller = zk_client(), zk_client()
    initial = LeaderIsrAndControllerEpoch(leader=1, leader_epoch=0, isr=(1, 2, 3),
                                          controller_epoch=1)
    assert controller.create_partition_state(TP, initial) == 0
    assert leader.get_partition_state(TP) == (initial, 0)

    shrunk = LeaderIsrAndControllerEpoch(1, 0, (1, 2), 1)
    assert leader.update_partition_state(TP, shrunk, expected_version=0) == 1
    with pytest.raises(PartitionStateConflictError, match="orders-0") as excinfo:
        controller.update_partition_state(TP, initial, expected_version=0)
    assert excinfo.value.expected_version == 0
    assert leader.get_partition_state(TP) == (shrunk, 1)
    assert leader.get_partition_state(TopicPartition("orders", 9)) is None


def test_topic_assignment_create_read_and_conditional_replace(zk_client: Factory) -> None:
    client = zk_client()
    assignment = TopicAssignment.of({0: [1, 2], 1: [2, 1]}, topic_id="ZOLr9CLNQjSW70hyIHx6BQ")
    client.create_topic_assignment("orders", assignment)
    with pytest.raises(TopicExistsError, match="orders"):
        client.create_topic_assignment("orders", assignment)
    assert client.get_all_topics() == ["orders"]
    assert client.get_topic_assignment("orders") == (assignment, 0)
    grown = TopicAssignment.of({0: [1, 2], 1: [2, 1], 2: [1, 2]}, topic_id=assignment.topic_id)
    assert client.set_topic_assignment("orders", grown, expected_version=0) == 1
    assert client.get_topic_assignment("missing") is None


def test_topic_config_change_is_announced(zk_client: Factory, zk_connect: str) -> None:
    client = zk_client()
    assert client.get_topic_config("orders") == {}
    client.set_topic_config("orders", {"unclean.leader.election.enable": "true"})
    client.set_topic_config("orders", {"unclean.leader.election.enable": "false"})
    assert client.get_topic_config("orders") == {"unclean.leader.election.enable": "false"}
    kazoo = raw(zk_connect)
    try:
        changes = sorted(kazoo.get_children("/config/changes"))
        assert changes == ["config_change_0000000000", "config_change_0000000001"]
        data, _ = kazoo.get("/config/changes/" + changes[0])
        assert json.loads(data) == {"version": 2, "entity_path": "topics/orders"}
    finally:
        kazoo.stop()
        kazoo.close()


def test_isr_change_notifications_are_sequential(zk_client: Factory) -> None:
    leader, controller = zk_client(), zk_client()
    seen: list[list[str]] = []
    controller.watch_children("/isr_change_notification", seen.append)
    first = leader.create_isr_change_notification([TP])
    second = leader.create_isr_change_notification([TopicPartition("a", 1), TP])
    assert (first, second) == ("0000000000", "0000000001")
    assert controller.get_isr_change_notifications() == [first, second]
    assert controller.get_isr_change_notification(second) == {TopicPartition("a", 1), TP}
    eventually(lambda: bool(seen) and len(seen[-1]) == 2)
    controller.delete_isr_change_notifications([first, second, "0000000099"])
    assert controller.get_isr_change_notifications() == []
    assert controller.get_isr_change_notification(first) == frozenset()
    eventually(lambda: seen[-1] == [])


def test_watches_follow_brokers_and_the_controller(zk_client: Factory) -> None:
    watcher, one, two = zk_client(), zk_client(), zk_client()
    broker_sets: list[list[int]] = []
    controllers: list[int | None] = []
    watcher.watch_broker_ids(broker_sets.append)
    watcher.watch_controller(controllers.append)
    eventually(lambda: broker_sets == [[]] and controllers == [None])

    one.register_broker(broker(1))
    two.register_broker(broker(2, port=9093))
    eventually(lambda: broker_sets[-1] == [1, 2])
    assert one.try_to_become_controller(1) is not None
    eventually(lambda: controllers[-1] == 1)

    one.close()
    eventually(lambda: broker_sets[-1] == [2] and controllers[-1] is None)


def test_session_expiry_re_registers_the_broker(zk_client: Factory, zk_connect: str) -> None:
    client, observer = zk_client(), zk_client()
    expired, renewed = threading.Event(), threading.Event()
    client.add_session_handlers(on_expired=expired.set, on_new_session=renewed.set)
    client.register_broker(broker(3))
    old_session = client.session_id

    # Closing the session from a second connection that presents its credentials is how a
    # real server expires it: the first connection is dropped and its session is gone.
    session_id, password = client.session_credentials
    impostor = KazooClient(hosts=zk_connect, client_id=(session_id, password))
    impostor.start(timeout=10)
    impostor.stop()
    impostor.close()

    assert expired.wait(30), "the session expiry was not reported"
    assert renewed.wait(30), "no new session was reported"
    assert client.session_id != old_session
    eventually(lambda: observer.get_broker_ids() == [3])
    kazoo = raw(zk_connect)
    try:
        assert kazoo.get("/brokers/ids/3")[1].ephemeralOwner == client.session_id
    finally:
        kazoo.stop()
        kazoo.close()


def test_no_server_is_a_clear_error() -> None:
    client = KafkaZkClient(f"127.0.0.1:{free_port()}", session_timeout_ms=2_000)
    with pytest.raises(ZooKeeperUnavailableError, match="could not connect to ZooKeeper at"):
        client.start(timeout=0.5)
    client.close()
