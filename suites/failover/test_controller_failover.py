"""Controller failover in ZooKeeper mode: who holds /controller, its epoch, and fencing.

The controller is whichever broker created the ephemeral /controller znode; /controller_epoch
counts elections, and every controller request carries it so that brokers can refuse a deposed
controller that has not noticed yet (a "zombie"). These tests crash the controller and check
the three promises: another broker takes over with the epoch + 1, a request with the old epoch
is refused, and every surviving broker converges on the new controller and leaders.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from harness.cluster.targets import Target
from harness.raw_client import RawClient
from harness.waiting import wait_for

from .placement import (
    WAIT_S,
    BrokerView,
    create_placed_topic,
    direct,
    roles,
    state_of,
    view_of,
)

LEADER_AND_ISR, LEADER_AND_ISR_VERSION = 4, 4
STALE_CONTROLLER_EPOCH = 11

pytestmark = [pytest.mark.requires_process_faults, pytest.mark.requires_zookeeper,
              pytest.mark.requires_controller, pytest.mark.requires_multi_broker,
              pytest.mark.requires_create_topics]


def _failed_over(cluster: Target, crash: bool) -> tuple[int, int, int, int]:
    """Kill (``crash``) or gracefully stop the controller; (old id, old epoch, new id, new
    epoch) once another broker holds /controller. A crashed controller's znode stays until its
    ZooKeeper session expires; a stopping one gives it up as it closes its session."""
    nodes = cluster.require_nodes()
    old = wait_for(nodes.controller_id, WAIT_S, "a controller")
    old_epoch = wait_for(nodes.controller_epoch, WAIT_S, "the controller epoch")
    if crash:
        nodes.kill(old)
    else:
        # Apache Kafka exits 143 after a clean SIGTERM shutdown (its JVM ends by the signal).
        assert nodes.stop_broker(old) in nodes.kind.clean_exit_codes, (
            f"broker {old} did not stop cleanly")
    session_s = nodes.spec.zookeeper_session_timeout_ms / 1000
    new = wait_for(lambda: c if (c := nodes.controller_id()) not in (None, old) else None,
                   session_s + WAIT_S, f"a broker other than {old} to take /controller")
    return old, old_epoch, new, wait_for(nodes.controller_epoch, WAIT_S, "the new epoch")


def test_a_crashed_controller_is_replaced_and_its_epoch_fenced(
        request: pytest.FixtureRequest, kafka_target: Target, kafka_admin: Any) -> None:
    """A new controller has epoch + 1; the old epoch gets STALE_CONTROLLER_EPOCH [KafkaController].

    A crashed controller is replaced by another broker with /controller_epoch + 1, and a request
    stamped with the old epoch is then refused with STALE_CONTROLLER_EPOCH (error code 11 of the
    protocol guide; Kafka docs, Design §Replication on the controller).

    The refused request is a LeaderAndIsr that would make another replica leader: a zombie
    controller's last word. It must change nothing, in the broker or in ZooKeeper.
    """
    who = roles(kafka_target)
    replicas = [who.first, who.second, who.controller]
    topic = create_placed_topic(request, kafka_target, kafka_admin, [replicas])
    old, old_epoch, new, new_epoch = _failed_over(kafka_target, crash=True)
    assert new in (who.first, who.second)
    assert new_epoch == old_epoch + 1

    survivor = who.first
    # The new controller drops the crashed broker from the ISR (a leader epoch bump of its own);
    # the zombie's request is judged against the state after that.
    wait_for(lambda: old not in state_of(kafka_target, topic)["isr"], WAIT_S,
             f"the new controller to drop crashed broker {old} from {topic}-0's ISR")
    before = state_of(kafka_target, topic)
    # The test reads the survivor's Metadata after the zombie's request, so it first waits for
    # that view to hold the state being protected: the new controller and the partition's
    # leader. Naming the controller is not enough: a new controller's first UpdateMetadata
    # carries no partitions, and a broker the old controller died before telling of the new
    # topic learns of it only with a later one (Kafka 3.9.2 answered without the partition once,
    # right after the ISR shrink showed in ZooKeeper).
    settled = BrokerView(new, {0: before["leader"]})
    wait_for(lambda: view_of(kafka_target, survivor, topic) == settled, WAIT_S,
             f"broker {survivor}'s Metadata to name controller {new} and leader "
             f"{before['leader']} of {topic}-0")
    host, port = direct(kafka_target, survivor)
    with RawClient(host, port) as raw:
        response = raw.request(LEADER_AND_ISR, LEADER_AND_ISR_VERSION, {
            "controller_id": old, "controller_epoch": old_epoch, "broker_epoch": -1,
            "topic_states": [{"topic_name": topic, "partition_states": [{
                "partition_index": 0, "controller_epoch": old_epoch, "leader": who.second,
                "leader_epoch": before["leader_epoch"] + 100, "isr": [who.second],
                "zk_version": 0, "replicas": replicas}]}],
            "live_leaders": []})

    assert int(response.error_code) == STALE_CONTROLLER_EPOCH
    assert view_of(kafka_target, survivor, topic) == settled
    assert state_of(kafka_target, topic)["leader_epoch"] == before["leader_epoch"]


def test_every_live_broker_converges_on_the_new_controller_and_leaders(
        request: pytest.FixtureRequest, kafka_target: Target, kafka_admin: Any) -> None:
    """After controller failover all brokers serve the new controller and leaders [KafkaController].

    Every live broker's Metadata names the new controller and the leaders ZooKeeper holds,
    including for partitions the old controller led: the controller sends UpdateMetadata to
    every broker (Kafka docs, Design §Replication on the controller).

    The controller is stopped gracefully here (the crash is the test above): it resigns as it
    closes its session, so the failover does not wait for a session timeout.
    """
    who = roles(kafka_target)
    topic = create_placed_topic(request, kafka_target, kafka_admin,
                                [[who.controller, who.first, who.second],
                                 [who.first, who.second, who.controller]])
    old, old_epoch, new, new_epoch = _failed_over(kafka_target, crash=False)
    assert new_epoch == old_epoch + 1

    def moved_off_the_stopped() -> dict[int, int] | None:
        leaders = {p: state_of(kafka_target, topic, p)["leader"] for p in (0, 1)}
        return leaders if leaders[0] in (who.first, who.second) else None

    leaders = wait_for(moved_off_the_stopped, WAIT_S, f"{topic}-0 to leave stopped broker {old}")
    assert leaders[1] == who.first
    expected = BrokerView(new, leaders)
    def sees_it(broker_id: int) -> bool:
        return view_of(kafka_target, broker_id, topic) == expected

    for broker_id in kafka_target.require_nodes().running_broker_ids():
        wait_for(functools.partial(sees_it, broker_id), WAIT_S,
                 f"broker {broker_id} to name controller {new} and leaders {leaders}")
