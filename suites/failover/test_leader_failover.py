"""Leader failover within the ISR: a crashed leader is replaced without losing an acked write.

With acks=all a record is acknowledged only once every in-sync replica has it, so whichever ISR
member the controller elects next holds every acknowledged record. The test keeps an acks=all
producer running while the leader is killed, and afterwards reads back every record it was
told was written.
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
    state_of,
    wait_for_state,
)


@pytest.mark.requires_process_faults
@pytest.mark.requires_multi_broker
@pytest.mark.requires_create_topics
def test_a_crashed_leader_is_replaced_from_the_isr_and_no_acked_record_is_lost(
        request: pytest.FixtureRequest, kafka_target: Target, kafka_admin: Any,
        steady_producer: Callable[..., SteadyProducer], kafka_consumer: Callable[..., Any]) -> None:
    """A crashed leader is replaced from the ISR, no acked record lost [Kafka docs, Replication].

    The controller elects another ISR member with a higher leader epoch, and every record
    acknowledged with acks=all is still readable: a committed message is not lost while one
    in-sync replica lives.
    """
    who = roles(kafka_target)
    topic = create_placed_topic(request, kafka_target, kafka_admin,
                                [[who.first, who.second, who.third]])
    before = state_of(kafka_target, topic)
    nodes = kafka_target.require_nodes()

    sends = steady_producer(topic)
    sends.wait_for_acks(50)
    nodes.kill(who.first)
    session_s = nodes.spec.zookeeper_session_timeout_ms / 1000
    after = wait_for_state(kafka_target, topic,
                           lambda s: s["leader"] in (who.second, who.third),
                           "to get a new leader from the live ISR", session_s + WAIT_S)
    sends.wait_for_acks(50)
    sends.stop()

    assert after["leader_epoch"] > before["leader_epoch"]
    assert who.first not in after["isr"]
    assert not sends.failed, f"acks=all sends failed across the failover: {sends.failed[:5]}"
    read = read_partition(kafka_consumer, topic)
    lost = sends.lost_in(read)
    assert not lost, f"{len(lost)} acknowledged records lost or changed: {sorted(lost)[:10]}"
