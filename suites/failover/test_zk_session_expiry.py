"""A broker's ZooKeeper session expiry: the cluster treats it as dead, then it comes back.

A broker is alive to the cluster exactly while its ephemeral /brokers/ids/[id] znode exists,
i.e. while its ZooKeeper session does. A broker that is frozen (SIGSTOP) or cut off from
ZooKeeper longer than zookeeper.session.timeout.ms loses the session: the znode goes, the
controller moves its leaderships to live ISR members, and when the broker can talk to ZooKeeper
again it registers under a new session (a new broker epoch, the znode's czxid) and rejoins.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kazoo.client import KazooClient

from harness.cluster.targets import Target
from harness.waiting import wait_for

from .placement import (
    WAIT_S,
    create_placed_topic,
    roles,
    state_of,
    wait_for_state,
)


def _registration_zxid(zk: KazooClient, broker_id: int) -> int | None:
    """czxid of /brokers/ids/[id]: the broker epoch, new for every session that registers."""
    stat = zk.exists(f"/brokers/ids/{broker_id}")
    return None if stat is None else stat.czxid


Fault = Callable[[Target, int], None]


def _pause(cluster: Target, broker_id: int) -> None:
    cluster.require_nodes().pause(broker_id)


def _resume(cluster: Target, broker_id: int) -> None:
    cluster.require_nodes().resume(broker_id)


def _cut_from_zookeeper(cluster: Target, broker_id: int) -> None:
    node = f"broker-{broker_id}"
    cluster.require_faults().partition({"zk": [node], node: ["zk"]})


def _heal(cluster: Target, _: int) -> None:
    cluster.require_faults().heal()


@pytest.mark.requires_zookeeper
@pytest.mark.requires_multi_broker
@pytest.mark.requires_create_topics
@pytest.mark.parametrize(("lose", "regain"), [
    pytest.param(_pause, _resume, id="paused",
                 marks=pytest.mark.requires_process_faults),
    pytest.param(_cut_from_zookeeper, _heal, id="cut-from-zookeeper",
                 marks=pytest.mark.requires_faults),
])
def test_an_expired_broker_is_deregistered_loses_leadership_and_registers_again(
        request: pytest.FixtureRequest, kafka_target: Target, kafka_admin: Any,
        lose: Fault, regain: Fault) -> None:
    """A broker whose ZooKeeper session expired is dead until it re-registers [Kafka design].

    Its /brokers/ids znode goes, the partitions it led get a live ISR member as leader, and once
    it reaches ZooKeeper again it registers under a new session and rejoins the ISR: a node is
    alive while it maintains its ZooKeeper session."""
    who = roles(kafka_target)
    expiring = who.first
    topic = create_placed_topic(request, kafka_target, kafka_admin,
                                [[expiring, who.second, who.controller]])
    before = state_of(kafka_target, topic)
    with kafka_target.require_nodes().zk() as zk:
        first_session = _registration_zxid(zk, expiring)
        assert first_session is not None

        lose(kafka_target, expiring)
        session_s = kafka_target.require_nodes().spec.zookeeper_session_timeout_ms / 1000
        wait_for(lambda: _registration_zxid(zk, expiring) is None, session_s + WAIT_S,
                 f"/brokers/ids/{expiring} to go when its session expires")
        moved = wait_for_state(kafka_target, topic,
                               lambda s: s["leader"] in (who.second, who.controller),
                               "to be led by a live ISR member")
        assert moved["leader_epoch"] > before["leader_epoch"]
        assert expiring not in moved["isr"]
        assert kafka_target.require_nodes().controller_id() == who.controller

        regain(kafka_target, expiring)
        second_session = wait_for(lambda: _registration_zxid(zk, expiring), WAIT_S,
                                  f"broker {expiring} to register again")
        assert second_session > first_session
        wait_for_state(kafka_target, topic, lambda s: expiring in s["isr"],
                       f"to take broker {expiring} back into its ISR")
