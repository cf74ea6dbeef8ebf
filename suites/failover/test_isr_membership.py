"""ISR shrink and expand under a network partition, as the cluster's metadata records it.

The ISR lives in ZooKeeper's /brokers/topics/T/partitions/P/state, or in a KRaft quorum's
metadata log. A follower that stops fetching is taken out of it — by the controller when the
follower's session ends (its ZooKeeper session expires, or its heartbeats to the active KRaft
controller stop for broker.session.timeout.ms), or by the leader once it lags more than
replica.lag.time.max.ms — so that acks=all writes go on without it. Once
the partition heals, the follower fetches what it missed and the leader adds it back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from harness.cluster.targets import Target

from .placement import (
    WAIT_S,
    SteadyProducer,
    create_placed_topic,
    read_partition,
    roles,
    wait_for_state,
)

# replica.lag.time.max.ms of the reference target (Kafka's default): the lag-only shrink waits
# this long, hence its slow marker.
REPLICA_LAG_TIME_MAX_S = 30.0


def _broker_node(broker_id: int) -> str:
    return f"broker-{broker_id}"


def _shrink_then_expand(request: pytest.FixtureRequest, cluster: Target, admin: Any,
                        steady_producer: Callable[..., SteadyProducer],
                        consumer: Callable[..., Any], cut: Callable[[int, int], object],
                        shrink_within_s: float) -> None:
    """Cut the follower with ``cut(leader, follower)``; it must leave the ISR while acks=all
    writes go on, and rejoin after the heal with every acked record on the partition."""
    who = roles(cluster)
    leader, follower = who.first, who.second
    topic = create_placed_topic(request, cluster, admin, [[leader, follower, who.third]])
    # acks=all waits for the cut follower until it is out of the ISR: sends must outlive that.
    timeout_ms = int((shrink_within_s + WAIT_S) * 1000)
    sends = steady_producer(topic, message_timeout_ms=timeout_ms)
    sends.wait_for_acks(20)

    cut(leader, follower)
    shrunk = wait_for_state(cluster, topic, lambda s: follower not in s["isr"],
                            f"to drop broker {follower} from its ISR", shrink_within_s + WAIT_S)
    assert shrunk["leader"] == leader
    assert sorted(shrunk["isr"]) == sorted([leader, who.third])
    sends.wait_for_acks(50)  # acks=all goes on with the shrunk ISR

    cluster.require_faults().heal()
    expanded = wait_for_state(cluster, topic, lambda s: follower in s["isr"],
                              f"to take broker {follower} back into its ISR after the heal")
    sends.wait_for_acks(20)
    sends.stop()
    assert expanded["leader"] == leader
    assert sorted(expanded["isr"]) == sorted([leader, follower, who.third])
    assert not sends.failed, f"acks=all sends failed: {sends.failed[:5]}"
    read = read_partition(consumer, topic)
    lost = sends.lost_in(read)
    assert not lost, f"{len(lost)} acknowledged records lost or changed: {sorted(lost)[:10]}"


@pytest.mark.requires_faults
@pytest.mark.requires_multi_broker
@pytest.mark.requires_create_topics
def test_an_isolated_follower_leaves_the_isr_and_rejoins_after_the_heal(
        request: pytest.FixtureRequest, kafka_target: Target, kafka_admin: Any,
        steady_producer: Callable[..., SteadyProducer], kafka_consumer: Callable[..., Any]) -> None:
    """An isolated follower leaves the ISR and rejoins after the heal [Kafka docs, Replication].

    Cut off from every node, its session ends (ZooKeeper's, or its KRaft heartbeats) and the
    controller removes it from the ISR; acks=all writes continue without it; after the heal it
    catches up and the leader adds it back."""
    session_s = kafka_target.require_nodes().spec.zookeeper_session_timeout_ms / 1000
    faults = kafka_target.require_faults()
    _shrink_then_expand(request, kafka_target, kafka_admin, steady_producer, kafka_consumer,
                        lambda _, follower: faults.isolate(_broker_node(follower)), session_s)


@pytest.mark.slow
@pytest.mark.requires_faults
@pytest.mark.requires_multi_broker
@pytest.mark.requires_create_topics
def test_a_follower_cut_from_its_leader_is_shrunk_out_for_lagging(
        request: pytest.FixtureRequest, kafka_target: Target, kafka_admin: Any,
        steady_producer: Callable[..., SteadyProducer], kafka_consumer: Callable[..., Any]) -> None:
    """A follower lagging over replica.lag.time.max.ms leaves the ISR, rejoins after [KIP-16].

    It still reaches the controller but not its leader, so only the leader's lag check removes it
    (Kafka docs, Design §Replication)."""
    def cut_pair(leader: int, follower: int) -> object:
        one, other = _broker_node(leader), _broker_node(follower)
        return kafka_target.require_faults().partition({one: [other], other: [one]})

    _shrink_then_expand(request, kafka_target, kafka_admin, steady_producer, kafka_consumer,
                        cut_pair, REPLICA_LAG_TIME_MAX_S)
