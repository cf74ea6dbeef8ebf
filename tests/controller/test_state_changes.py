"""Pure state transitions, request bodies and the channel's ordering/retries (no ZooKeeper)."""

from __future__ import annotations

import asyncio
from typing import Any

from reference_broker.controller.channel_manager import ControllerChannelManager
from reference_broker.controller.controller_context import ControllerContext
from reference_broker.controller.election import LeaderElection
from reference_broker.controller.request_batch import BrokerRequest, ControllerBrokerRequestBatch
from reference_broker.controller.state_changes import (
    bumped_state,
    elected_state,
    imbalanced_partitions,
    initial_state,
    reassignment_in_flight,
    state_without_replica,
    unclean_leader_election_enabled,
)
from reference_broker.log.topic_partition import TopicPartition
from reference_broker.network.broker_client import BrokerClientError
from reference_broker.zk.broker_znodes import BrokerInfo, EndPoint
from reference_broker.zk.topic_znodes import LeaderIsrAndControllerEpoch, ReplicaAssignment

State = LeaderIsrAndControllerEpoch
TP = TopicPartition("t", 0)


def test_initial_state_takes_live_replicas_in_assignment_order() -> None:
    assert initial_state([3, 1, 2], {1, 2}, 5) == State(1, 0, (1, 2), 5)
    assert initial_state([3], {1}, 5) is None


def test_every_controller_change_is_a_new_leader_epoch() -> None:
    old = State(1, 7, (1, 2, 3), 2)
    assert elected_state(old, LeaderElection(2, (2, 3)), 4) == State(2, 8, (2, 3), 4)
    assert bumped_state(old, 4) == State(1, 8, (1, 2, 3), 4)
    assert state_without_replica(old, 3, 4) == State(1, 8, (1, 2), 4)
    assert state_without_replica(old, 1, 4) == State(-1, 8, (2, 3), 4)
    assert state_without_replica(State(1, 7, (1,), 2), 1, 4) == State(-1, 8, (1,), 4)
    assert state_without_replica(old, 9, 4) is None


def test_topic_override_of_unclean_election_wins_over_the_broker() -> None:
    key = "unclean.leader.election.enable"
    assert unclean_leader_election_enabled({}, True) is True
    assert unclean_leader_election_enabled({key: "false"}, True) is False
    assert unclean_leader_election_enabled({key: "TRUE"}, False) is True


def test_imbalance_counts_partitions_not_led_by_their_preferred_replica() -> None:
    a, b, c = (TopicPartition("t", p) for p in range(3))
    replicas = {a: [1, 2], b: [1, 2], c: [2, 1]}
    leaders = {a: 2, b: 1, c: 2}
    assert imbalanced_partitions(replicas, leaders, {1, 2}, 10) == [a]
    assert imbalanced_partitions(replicas, leaders, {1, 2}, 50) == []
    assert imbalanced_partitions(replicas, leaders, {2}, 10) == []


def test_reassignment_in_flight_puts_targets_first() -> None:
    assert reassignment_in_flight([1, 2, 3], [4, 2]) == ReplicaAssignment((4, 2, 1, 3), (4,),
                                                                          (1, 3))


def _context() -> ControllerContext:
    ctx = ControllerContext(epoch=3, epoch_zk_version=2)
    for broker_id in (1, 2):
        ctx.add_broker(BrokerInfo(broker_id, (EndPoint("PLAINTEXT", "h", 9000 + broker_id),)),
                       100 + broker_id)
    ctx.assignments[TP] = ReplicaAssignment((1, 2, 3))
    ctx.put_state(TP, State(1, 4, (1, 2), 3), 6)
    return ctx


def test_batch_builds_one_request_of_each_kind_per_broker() -> None:
    ctx = _context()
    batch = ControllerBrokerRequestBatch(0, ctx)
    batch.add_leader_and_isr([1, 2, 3], TP)
    batch.add_stop_replica([2], TP, delete_partition=True, leader_epoch=-2)
    requests = batch.requests()
    assert [(r.broker_id, r.api_key) for r in requests] == [(1, 4), (2, 4), (1, 6), (2, 6),
                                                            (2, 5)]
    leader_and_isr = requests[1].body
    assert leader_and_isr["broker_epoch"] == 102 and leader_and_isr["controller_epoch"] == 3
    assert leader_and_isr["live_leaders"] == [{"broker_id": 1, "host_name": "h", "port": 9001}]
    assert leader_and_isr["topic_states"][0]["partition_states"][0]["zk_version"] == 6
    metadata = requests[2].body["topic_states"][0]["partition_states"][0]
    assert metadata["offline_replicas"] == [3]
    assert requests[4].deleted_partitions == (TP,)


class _FlakyClient:
    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.sent: list[Any] = []
        self.closed = False

    def set_address(self, host: str, port: int) -> None:
        pass

    async def request(self, api_key: int, version: int, body: Any) -> Any:
        if self.failures:
            self.failures -= 1
            raise BrokerClientError("connection refused")
        self.sent.append(body)
        return {"answered": body}

    async def close(self) -> None:
        self.closed = True


def test_channel_retries_and_keeps_each_brokers_order() -> None:
    client = _FlakyClient(failures=2)
    answers: list[Any] = []

    async def scenario() -> None:
        channel = ControllerChannelManager(0, retry_backoff_s=0.01,
                                           client_factory=lambda host, port: client)
        channel.add_broker(BrokerInfo(1, (EndPoint("PLAINTEXT", "h", 1),)))
        for n in range(3):
            channel.send(BrokerRequest(1, 6, 6, {"n": n}),
                         lambda _req, response: answers.append(response))
        channel.send(BrokerRequest(9, 6, 6, {"n": 9}))  # no channel: dropped
        for _ in range(200):
            if len(answers) == 3:
                break
            await asyncio.sleep(0.01)
        await channel.shutdown()

    asyncio.run(asyncio.wait_for(scenario(), 10))
    assert client.sent == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert answers == [{"answered": {"n": n}} for n in range(3)]
    assert client.closed


def test_peer_address_override_wins_over_the_registration() -> None:
    channel = ControllerChannelManager(0, peer_addresses={1: ("proxy", 7000)})
    info = BrokerInfo(1, (EndPoint("PLAINTEXT", "h", 1),))
    assert channel.address_of(info) == ("proxy", 7000)
    assert channel.address_of(BrokerInfo(2, (EndPoint("PLAINTEXT", "h", 2),))) == ("h", 2)
