"""Preferred replica election: leadership goes back to the first replica of the assignment.

After a failover, leadership stays where it moved even once the preferred replica (the first
in the assignment) is back in the ISR; an ElectLeaders request of type PREFERRED (KIP-460,
``kafka-leader-election --election-type preferred``) moves it back.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import ElectionType, KafkaError, TopicPartition

from harness.cluster.targets import Target
from harness.waiting import wait_for

from .placement import (
    WAIT_S,
    create_placed_topic,
    roles,
    state_of,
    wait_for_state,
)


@pytest.mark.requires_process_faults
@pytest.mark.requires_multi_broker
@pytest.mark.requires_create_topics
def test_elect_leaders_preferred_gives_leadership_back_to_the_first_replica(
        request: pytest.FixtureRequest, kafka_target: Target, kafka_admin: Any) -> None:
    """ElectLeaders(PREFERRED) makes the first replica leader again [KIP-460; ElectLeaders API].

    Once the preferred replica is back in the ISR, it leads again with a higher leader epoch."""
    who = roles(kafka_target)
    topic = create_placed_topic(request, kafka_target, kafka_admin,
                                [[who.first, who.second, who.third]])
    nodes = kafka_target.require_nodes()
    # Apache Kafka exits 143 after a clean SIGTERM shutdown (its JVM ends by the signal).
    assert nodes.stop_broker(who.first) in nodes.kind.clean_exit_codes, (
        f"broker {who.first} did not stop cleanly")
    moved = state_of(kafka_target, topic)
    assert moved["leader"] != who.first
    nodes.start_broker(who.first)
    wait_for_state(kafka_target, topic, lambda s: who.first in s["isr"],
                   f"to take broker {who.first} back into its ISR")

    partition = TopicPartition(topic, 0)

    def answered() -> tuple[int] | None:
        error = kafka_admin.elect_leaders(ElectionType.PREFERRED,
                                          [partition]).result(WAIT_S)[partition]
        code = KafkaError.NO_ERROR if error is None else error.code()
        # The controller learns of the ISR expansion a moment after the state znode shows it
        # (/isr_change_notification); until then the preferred replica is "not available".
        return None if code == KafkaError.PREFERRED_LEADER_NOT_AVAILABLE else (code,)

    (code,) = wait_for(answered, WAIT_S, f"an ElectLeaders(PREFERRED) answer for {topic}-0")
    # ELECTION_NOT_NEEDED only if the controller's periodic rebalance got there first.
    assert code in (KafkaError.NO_ERROR, KafkaError.ELECTION_NOT_NEEDED), KafkaError(code)
    # The election is committed when it is answered; brokers learn of it a moment later (a
    # KRaft broker when it has fetched the metadata log that far).
    after = wait_for_state(kafka_target, topic, lambda s: s["leader"] == who.first,
                           f"to be led by its preferred replica {who.first} again")
    assert after["leader_epoch"] > moved["leader_epoch"]
