"""Controlled shutdown: a broker stopped gracefully hands its leaderships over first.

Before it exits, a stopping broker asks the controller (ControlledShutdown) to move leadership
of every partition it leads to another ISR member and to take it out of the ISRs. Writes then
stall only as long as a client needs to find the new leader, not for a session timeout (a
KRaft broker's controlled shutdown is the same request to the active controller, KIP-631).
Where the metadata is ZooKeeper's, its total order of writes (zxids) also shows which happened
first: the partition's new leader or the broker's registration going away.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from harness.cluster.kinds import Capability
from harness.cluster.targets import Target

from .placement import (
    SteadyProducer,
    create_placed_topic,
    read_partition,
    roles,
    state_of,
)

# Longest write stall allowed while the leader stops. A crash costs a session timeout (6 s:
# ZooKeeper's, or KRaft's broker.session.timeout.ms) before anyone moves; a handover costs a
# metadata refresh and a retry.
MAX_UNAVAILABLE_S = 3.0


@pytest.mark.requires_process_faults
@pytest.mark.requires_multi_broker
@pytest.mark.requires_create_topics
def test_a_stopping_leader_moves_leadership_away_before_it_exits(
        request: pytest.FixtureRequest, kafka_target: Target, kafka_admin: Any,
        steady_producer: Callable[..., SteadyProducer], kafka_consumer: Callable[..., Any]) -> None:
    """A stopping leader hands leadership over before it exits [Kafka docs, Graceful shutdown].

    With controlled.shutdown.enable the leader moves its leadership to another ISR member and
    leaves the ISR before its registration goes, with no acked record lost and writes stalled
    only briefly."""
    who = roles(kafka_target)
    topic = create_placed_topic(request, kafka_target, kafka_admin,
                                [[who.first, who.second, who.third]])
    before = state_of(kafka_target, topic)
    nodes = kafka_target.require_nodes()

    sends = steady_producer(topic)
    sends.wait_for_acks(50)
    # Apache Kafka exits 143 after a clean SIGTERM shutdown (its JVM ends by the signal).
    assert nodes.stop_broker(who.first) in nodes.kind.clean_exit_codes, (
        f"broker {who.first} did not stop cleanly")
    if Capability.ZOOKEEPER in kafka_target.capabilities:
        with nodes.zk() as zk:
            state_stat = zk.exists(f"/brokers/topics/{topic}/partitions/0/state")
            registrations_stat = zk.exists("/brokers/ids")
        assert state_stat.mzxid < registrations_stat.pzxid, (
            "the partition's state was last written after the stopped broker deregistered: "
            "leadership moved only once it was gone")
    after = state_of(kafka_target, topic)
    sends.wait_for_acks(50)
    sends.stop()

    assert after["leader"] in (who.second, who.third), after
    assert after["leader_epoch"] > before["leader_epoch"]
    assert who.first not in after["isr"], after
    assert not sends.failed, f"acks=all sends failed during the shutdown: {sends.failed[:5]}"
    assert sends.max_ack_gap() <= MAX_UNAVAILABLE_S, (
        f"writes stalled {sends.max_ack_gap():.2f} s (bound {MAX_UNAVAILABLE_S} s)")
    read = read_partition(kafka_consumer, topic)
    lost = sends.lost_in(read)
    assert not lost, f"{len(lost)} acknowledged records lost or changed: {sorted(lost)[:10]}"
