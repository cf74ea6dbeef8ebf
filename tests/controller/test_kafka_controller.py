"""The controller against a real ZooKeeper and fake brokers: election, failover, leadership."""

from __future__ import annotations

import logging

import pytest
from kazoo.client import KazooClient

from harness.wire.errors import ErrorCode
from reference_broker.log.topic_partition import TopicPartition
from reference_broker.zk.broker_znodes import ControllerZNode
from reference_broker.zk.topic_znodes import LeaderIsrAndControllerEpoch, TopicAssignment
from tests.controller.fake_broker import (
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    Cluster,
    eventually,
    run,
    with_cluster,
)

TP = TopicPartition("orders", 0)


def test_one_of_two_controllers_wins_and_the_other_takes_over_with_the_next_epoch(
        zk_connect: str) -> None:
    async def body(cluster: Cluster) -> None:
        await cluster.add_broker(1)
        await cluster.add_broker(2)
        first = await cluster.wait_active()
        assert first.epoch == 1
        assert cluster.admin.get_controller_epoch().epoch == 1
        assert cluster.admin.get_controller_id() == first.broker_id
        other = next(c for c in cluster.controllers.values() if c is not first)
        assert not other.is_active and other.epoch == -1

        await cluster.kill(first.broker_id)
        second = await cluster.wait_active()
        assert second is other and second.epoch == 2
        assert cluster.admin.get_controller_id() == other.broker_id

    run(with_cluster(zk_connect, body))


def test_new_topic_gets_kafkas_initial_state_and_replicas_are_told(zk_connect: str) -> None:
    async def body(cluster: Cluster) -> None:
        for broker_id in (1, 2, 3):
            await cluster.add_broker(broker_id, controller=broker_id == 1)
        controller = await cluster.wait_active()
        cluster.admin.create_topic_assignment(
            "orders", TopicAssignment.of({0: [2, 1, 3], 1: [4, 3, 1]}))
        p1 = TopicPartition("orders", 1)
        await eventually(lambda: cluster.state(p1))
        assert cluster.state(TP) == LeaderIsrAndControllerEpoch(2, 0, (2, 1, 3), 1)
        # broker 4 is not alive: the first live replica leads, only live replicas are in sync
        assert cluster.state(p1) == LeaderIsrAndControllerEpoch(3, 0, (3, 1), 1)

        sent = await eventually(lambda: cluster.brokers[2].partition_states(LEADER_AND_ISR, TP))
        assert sent[-1] | {} == {
            "partition_index": 0, "controller_epoch": 1, "leader": 2, "leader_epoch": 0,
            "isr": [2, 1, 3], "zk_version": 0, "replicas": [2, 1, 3], "adding_replicas": [],
            "removing_replicas": [], "is_new": True,
        }
        request = cluster.brokers[2].of(LEADER_AND_ISR)[-1]
        assert request["controller_id"] == 1 and request["controller_epoch"] == controller.epoch
        assert request["broker_epoch"] == cluster.brokers[2].broker_epoch
        assert request["live_leaders"] == [
            {"broker_id": 2, "host_name": "127.0.0.1", "port": cluster.brokers[2].port}]
        metadata = await eventually(
            lambda: cluster.brokers[1].partition_states(UPDATE_METADATA, p1))
        assert metadata[-1]["offline_replicas"] == [4]
        live = cluster.brokers[1].of(UPDATE_METADATA)[-1]["live_brokers"]
        assert sorted(b["id"] for b in live) == [1, 2, 3]
        assert live[0]["endpoints"][0]["listener"] == "PLAINTEXT"

    run(with_cluster(zk_connect, body))


async def _three_brokers_one_topic(cluster: Cluster, replicas: list[int]) -> None:
    for broker_id in (1, 2, 3):
        await cluster.add_broker(broker_id, controller=broker_id == 1)
    await cluster.wait_active()
    cluster.admin.create_topic_assignment("orders", TopicAssignment.of({0: replicas}))
    await eventually(lambda: cluster.state(TP))


def test_leader_death_elects_the_next_isr_member_with_a_new_leader_epoch(zk_connect: str
                                                                         ) -> None:
    async def body(cluster: Cluster) -> None:
        await _three_brokers_one_topic(cluster, [2, 3, 1])
        await cluster.kill(2)
        state = await eventually(lambda: (s := cluster.state(TP)) and s.leader != 2 and s)
        assert state == LeaderIsrAndControllerEpoch(3, 1, (3, 1), 1)
        sent = await eventually(lambda: [p for p in cluster.brokers[3].partition_states(
            LEADER_AND_ISR, TP) if p["leader"] == 3])
        assert sent[-1]["leader_epoch"] == 1 and sent[-1]["zk_version"] == 1
        assert sent[-1]["is_new"] is False

        # a follower dying only shrinks the ISR, and that too is a new leader epoch
        await cluster.kill(3)
        state = await eventually(lambda: (s := cluster.state(TP)) and s.isr == (1,) and s)
        assert state == LeaderIsrAndControllerEpoch(1, 2, (1,), 1)

    run(with_cluster(zk_connect, body))


def test_no_live_isr_leaves_no_leader_until_unclean_election_is_enabled_at_runtime(
        zk_connect: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "reference_broker.controller")

    async def body(cluster: Cluster) -> None:
        await _three_brokers_one_topic(cluster, [2, 3])
        # leader 2 shrinks the ISR to itself, as a leader does with a lagging follower
        state, version = cluster.admin.get_partition_state(TP)
        cluster.admin.update_partition_state(TP, LeaderIsrAndControllerEpoch(2, 0, (2,), 1),
                                             version)
        cluster.admin.create_isr_change_notification([TP])
        await eventually(lambda: not cluster.admin.get_isr_change_notifications())

        await cluster.kill(2)
        state = await eventually(lambda: (s := cluster.state(TP)) and s.leader_epoch == 1 and s)
        assert state == LeaderIsrAndControllerEpoch(-1, 1, (2,), 1)
        assert "Unclean leader election" not in caplog.text

        cluster.admin.set_topic_config("orders", {"unclean.leader.election.enable": "true"})
        state = await eventually(lambda: (s := cluster.state(TP)) and s.leader == 3 and s)
        assert state == LeaderIsrAndControllerEpoch(3, 2, (3,), 1)
        assert "Unclean leader election" in caplog.text

    run(with_cluster(zk_connect, body))


def test_elect_leaders_unclean_and_preferred(zk_connect: str) -> None:
    async def body(cluster: Cluster) -> None:
        await _three_brokers_one_topic(cluster, [2, 3])
        controller = cluster.controllers[1]
        assert await controller.elect_leaders(0, [("orders", 0)]) == {
            ("orders", 0): (ErrorCode.election_not_needed,
                            "Leader election not needed for topic partition.")}
        assert (await controller.elect_leaders(0, [("nope", 0)]))[("nope", 0)][0] == \
            ErrorCode.unknown_topic_or_partition
        state, version = cluster.admin.get_partition_state(TP)
        cluster.admin.update_partition_state(TP, LeaderIsrAndControllerEpoch(2, 0, (2,), 1),
                                             version)
        cluster.admin.create_isr_change_notification([TP])
        await eventually(lambda: not cluster.admin.get_isr_change_notifications())
        await cluster.kill(2)
        await eventually(lambda: cluster.state(TP).leader == -1)

        assert await controller.elect_leaders(1, [("orders", 0)]) == {
            ("orders", 0): (ErrorCode.none, None)}
        assert cluster.state(TP) == LeaderIsrAndControllerEpoch(3, 2, (3,), 1)

    run(with_cluster(zk_connect, body))


def test_preferred_replica_election_request_moves_leadership_back(zk_connect: str) -> None:
    async def body(cluster: Cluster) -> None:
        await _three_brokers_one_topic(cluster, [2, 3, 1])
        await cluster.kill(2)
        await eventually(lambda: cluster.state(TP).leader == 3)
        await cluster.add_broker(2, controller=False)
        # broker 2 catches up and leader 3 puts it back into the ISR
        state, version = cluster.admin.get_partition_state(TP)
        assert state.leader == 3
        cluster.admin.update_partition_state(
            TP, LeaderIsrAndControllerEpoch(3, state.leader_epoch, (3, 1, 2), 1), version)
        cluster.admin.create_isr_change_notification([TP])
        await eventually(lambda: not cluster.admin.get_isr_change_notifications())
        cluster.admin.create_preferred_replica_election([TP])
        state = await eventually(lambda: (s := cluster.state(TP)) and s.leader == 2 and s)
        assert state.isr == (3, 1, 2) and state.leader_epoch == 2
        await eventually(lambda: cluster.admin.get_preferred_replica_election() is None)
        sent = await eventually(lambda: [p for p in cluster.brokers[2].partition_states(
            LEADER_AND_ISR, TP) if p["leader"] == 2])
        assert sent[-1]["leader_epoch"] == 2

    run(with_cluster(zk_connect, body))


def test_controlled_shutdown_moves_leadership_away(zk_connect: str) -> None:
    async def body(cluster: Cluster) -> None:
        for broker_id in (1, 2, 3):
            await cluster.add_broker(broker_id, controller=broker_id == 1)
        controller = await cluster.wait_active()
        cluster.admin.create_topic_assignment(
            "orders", TopicAssignment.of({0: [2, 3], 1: [3, 2], 2: [2]}))
        p1, p2 = TopicPartition("orders", 1), TopicPartition("orders", 2)
        await eventually(lambda: cluster.state(p2))

        assert await controller.controlled_shutdown(2, cluster.brokers[2].broker_epoch - 1) == (
            ErrorCode.stale_broker_epoch, [])
        assert await controller.controlled_shutdown(2, cluster.brokers[2].broker_epoch) == (
            ErrorCode.none, [])
        assert cluster.state(TP) == LeaderIsrAndControllerEpoch(3, 1, (3,), 1)
        assert cluster.state(p1) == LeaderIsrAndControllerEpoch(3, 1, (3,), 1)
        assert cluster.state(p2).leader == 2  # a single replica cannot move
        stops = await eventually(lambda: cluster.brokers[2].partition_states(STOP_REPLICA, p1))
        assert stops[-1] == {"partition_index": 1, "leader_epoch": 0,
                             "delete_partition": False}
        assert await cluster.controllers[1].controlled_shutdown(9, 1) == (
            ErrorCode.broker_not_available, [])

    run(with_cluster(zk_connect, body))


def test_topic_deletion_stops_and_deletes_replicas_then_removes_the_znodes(
        zk_connect: str) -> None:
    async def body(cluster: Cluster) -> None:
        await _three_brokers_one_topic(cluster, [2, 3])
        cluster.admin.set_topic_config("orders", {"retention.ms": "1000"})
        cluster.admin.create_delete_topic_request("orders")
        await eventually(lambda: "orders" not in cluster.admin.get_all_topics())
        for broker_id in (2, 3):
            stops = cluster.brokers[broker_id].partition_states(STOP_REPLICA, TP)
            assert stops == [{"partition_index": 0, "leader_epoch": -2,
                              "delete_partition": True}]
        metadata = cluster.brokers[1].partition_states(UPDATE_METADATA, TP)
        assert metadata[-1]["leader"] == -2
        assert cluster.admin.get_delete_topic_requests() == []
        assert cluster.admin.get_topic_config("orders") == {}
        assert cluster.admin.get_partition_state(TP) is None

    run(with_cluster(zk_connect, body))


def test_controller_resigns_when_another_broker_takes_over_controller(zk_connect: str) -> None:
    async def body(cluster: Cluster) -> None:
        await cluster.add_broker(1)
        controller = await cluster.wait_active()
        client = KazooClient(hosts=zk_connect)
        client.start(timeout=10)
        try:
            tx = client.transaction()
            tx.delete(ControllerZNode.path())
            tx.create(ControllerZNode.path(), ControllerZNode.encode(7, 0))
            tx.commit()
            await eventually(lambda: not controller.is_active)
            assert controller.active_controller_id == 7
        finally:
            client.stop()
            client.close()

    run(with_cluster(zk_connect, body))


def test_controller_resigns_when_its_epoch_is_fenced(zk_connect: str) -> None:
    async def body(cluster: Cluster) -> None:
        await _three_brokers_one_topic(cluster, [2, 3])
        controller = cluster.controllers[1]
        client = KazooClient(hosts=zk_connect)
        client.start(timeout=10)
        try:
            client.set("/controller_epoch", b"42")  # a newer controller's epoch
        finally:
            client.stop()
            client.close()
        await cluster.kill(2)
        await eventually(lambda: not controller.is_active)
        assert cluster.state(TP).leader == 2  # the deposed controller wrote nothing

    run(with_cluster(zk_connect, body))


def test_reassignment_adds_new_replicas_and_drops_old_ones_once_in_sync(zk_connect: str
                                                                       ) -> None:
    async def body(cluster: Cluster) -> None:
        await _three_brokers_one_topic(cluster, [2, 1])
        cluster.admin.create_partition_reassignment({TP: [3, 1]})
        assignment = await eventually(lambda: (a := cluster.admin.get_topic_assignment(
            "orders")[0].partitions[0]).adding_replicas and a)
        assert assignment.replicas == (3, 1, 2) and assignment.removing_replicas == (2,)
        told = await eventually(lambda: cluster.brokers[3].partition_states(LEADER_AND_ISR, TP))
        assert told[-1]["replicas"] == [3, 1, 2] and told[-1]["adding_replicas"] == [3]

        # broker 3 catches up; the leader adds it to the ISR and says so
        state, version = cluster.admin.get_partition_state(TP)
        cluster.admin.update_partition_state(
            TP, LeaderIsrAndControllerEpoch(2, state.leader_epoch, (2, 1, 3), 1), version)
        cluster.admin.create_isr_change_notification([TP])
        await eventually(lambda: cluster.admin.get_partition_reassignment() is None)
        assert cluster.admin.get_topic_assignment("orders")[0].replicas() == {0: [3, 1]}
        state = cluster.state(TP)
        assert state.leader == 3 and 2 not in state.isr
        stops = await eventually(lambda: cluster.brokers[2].partition_states(STOP_REPLICA, TP))
        assert stops[-1]["delete_partition"] is True

    run(with_cluster(zk_connect, body))
