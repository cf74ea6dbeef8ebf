"""Client-side assignors over a real group: confluent-kafka (librdkafka) consumers.

The assignment is computed by the group leader's client and only relayed by the coordinator,
so these check that the coordinator gives the leader every member's subscription, selects the
requested protocol and hands each member exactly the share the leader computed. Both Kafka
assignors order members by member id, so the expected shares are stated in that order.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from harness.cluster.targets import Target
from harness.waiting import wait_for

from ._helpers import RawFactory, broker_addresses, coordinator_client, wait_topic_known

Share = list[tuple[str, int]]
SETTLE_S = 30.0
QUIET_S = 1.0  # over three heartbeat intervals: a pending rebalance would show by then


class _Member:
    """A subscribed consumer and how many assignments it has been given so far."""

    def __init__(self, consumer: Any, topics: list[str]) -> None:
        self.consumer = consumer
        self.assignments = 0
        consumer.subscribe(topics, on_assign=self._assigned)

    def _assigned(self, _consumer: Any, _partitions: list[Any]) -> None:
        self.assignments += 1

    def share(self) -> tuple[str, Share]:
        """(member id, assigned partitions), polling first so callbacks run."""
        self.consumer.poll(0.05)
        return (self.consumer.memberid() or "",
                sorted((tp.topic, tp.partition) for tp in self.consumer.assignment()))


def _consumers(consumer: Callable[..., Any], raw_client: RawFactory, group: str,
               strategy: str, topics: list[str], count: int) -> list[_Member]:
    """`count` subscribed consumers of `group`, once its coordinator serves it (librdkafka's
    AdminClient gives up on a group while the offsets topic is still being created) and every
    broker's own metadata has `topics`: a consumer joins with the subscribed topics its metadata
    holds, and on Apache Kafka 3.9.2 one that asked a broker not yet told of the topic created
    last joined without it, so round-robin gave 4 and 2 partitions, stable for over a second
    (matrix of 2026-11-26, 08:26)."""
    coordinator_client(raw_client, group)
    for address in broker_addresses(raw_client()).values():
        for topic in topics:
            wait_topic_known(raw_client(address), topic)
    return [_Member(consumer(**{"group.id": group, "partition.assignment.strategy": strategy,
                                "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
                                "enable.auto.commit": False}), topics)
            for _ in range(count)]


def _settled_shares(members: list[_Member], partitions: int) -> list[Share]:
    """Each member's share, members in member id order, once every member has been given an
    assignment, the shares are disjoint and cover every partition, and nothing changed for
    QUIET_S. Judged from the consumers, so the rule checked is the assignment itself."""
    last: list[tuple[str, Share]] = []
    since = time.monotonic()

    def settled() -> list[tuple[str, Share]] | None:
        nonlocal last, since
        held = sorted(member.share() for member in members)
        owned = [tp for _, share in held for tp in share]
        complete = all(member.assignments for member in members) \
            and len(owned) == partitions == len(set(owned))
        if not complete or held != last:
            last, since = held, time.monotonic()
            return None
        return held if time.monotonic() - since >= QUIET_S else None

    return [share for _, share in wait_for(settled, SETTLE_S, "the group to settle",
                                           retry_on=())]


@pytest.mark.parametrize("strategy, expected", [
    ("range", [[(0, 0), (0, 1), (1, 0), (1, 1)], [(0, 2), (1, 2)]]),
    ("roundrobin", [[(0, 0), (0, 2), (1, 1)], [(0, 1), (1, 0), (1, 2)]]),
])
def test_range_and_round_robin_assign_as_kafkas_assignors_do(
        kafka_target: Target, kafka_consumer: Callable[..., Any], kafka_raw_client: RawFactory,
        make_topic: Callable[..., str], strategy: str,
        expected: list[list[tuple[int, int]]]) -> None:
    """Two consumers of topics t0 and t1 with three partitions each: range gives the first
    member (by member id) t0p0, t0p1, t1p0, t1p1 and the second t0p2, t1p2; round-robin gives
    t0p0, t0p2, t1p1 and t0p1, t1p0, t1p2 [Kafka RangeAssignor / RoundRobinAssignor javadoc].
    """
    topics = sorted([make_topic(partitions=3), make_topic(partitions=3)])
    group = f"{topics[0]}-group"
    members = _consumers(kafka_consumer, kafka_raw_client, group, strategy, topics, 2)
    shares = _settled_shares(members, 6)
    assert shares == [[(topics[t], p) for t, p in share] for share in expected]


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_members_beyond_the_partition_count_get_nothing(
        kafka_target: Target, kafka_consumer: Callable[..., Any], kafka_raw_client: RawFactory,
        make_topic: Callable[..., str], strategy: str) -> None:
    """With more consumers than partitions each partition goes to exactly one member (the first
    members by member id) and the rest stay in the group with an empty assignment [Kafka
    RangeAssignor / RoundRobinAssignor; consumer group semantics]."""
    topic = make_topic(partitions=2)
    members = _consumers(kafka_consumer, kafka_raw_client, f"{topic}-group", strategy, [topic], 3)
    shares = _settled_shares(members, 2)
    assert shares == [[(topic, 0)], [(topic, 1)], []]
