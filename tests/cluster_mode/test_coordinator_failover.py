"""Group coordinator failover: committed offsets live in the replicated ``__consumer_offsets``.

Kafka's contract: a group's coordinator is the leader of ``__consumer_offsets`` partition
``abs(groupId.hashCode) % offsets.topic.num.partitions``. An OffsetCommit is acknowledged only
once the offsets record is replicated to that partition's ISR (``acks=-1``), so when the
coordinator crashes the new leader of the partition loads the group and serves exactly the
acknowledged offsets: OffsetFetch (AdminClient ``list_consumer_group_offsets``) returns them,
and a consumer of the group resumes at them — nothing committed is delivered again, nothing
after it is skipped. The group itself works again under the new coordinator: a consumer joins,
is assigned every partition, consumes new records and commits.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.local import LocalCluster
from reference_broker.coordinator.common import partition_for

MakeCluster = Callable[..., LocalCluster]

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = 50  # Kafka's default offsets.topic.num.partitions
PARTITIONS = 3
RECORDS_PER_PARTITION = 10
COMMITTED = {0: 3, 1: 5, 2: 7}  # a different position per partition, below what was read
WAIT_S = 30.0


def _create_topic(local: LocalCluster, admin: AdminClient) -> str:
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    futures = admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS,
                                            replication_factor=3)], operation_timeout=20)
    futures[topic].result(timeout=30)
    for partition in range(PARTITIONS):
        local.wait_for(lambda p=partition: len((local.partition_state(topic, p) or {})
                                               .get("isr", [])) == 3
                       and local.leader(topic, p) is not None, WAIT_S,
                       f"{topic}-{partition} to have a leader and a full ISR")
    return topic


def _produce(local: LocalCluster, topic: str, values_by_partition: dict[int, list[str]]
             ) -> dict[tuple[int, int], str]:
    """acks=all, explicit partitions; {(partition, offset): value} of what was acknowledged."""
    acknowledged: dict[tuple[int, int], str] = {}
    errors: list[object] = []

    def report(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            acknowledged[(msg.partition(), msg.offset())] = msg.value().decode()  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": local.bootstrap, "acks": "all", "linger.ms": 0,
                         "message.timeout.ms": 20000})
    try:
        for partition, values in values_by_partition.items():
            for value in values:
                producer.produce(topic, value=value.encode(), partition=partition,
                                 on_delivery=report)
    finally:
        remaining = producer.flush(30)
    assert remaining == 0 and not errors, f"{remaining} undelivered, errors {errors}"
    return acknowledged


def _consumer(local: LocalCluster, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": local.bootstrap, "group.id": group,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})


def _consume(local: LocalCluster, consumer: Consumer, wanted: int, what: str
             ) -> dict[int, list[tuple[int, str]]]:
    """Poll until ``wanted`` records arrived; per partition, [(offset, value)] in order."""
    got: dict[int, list[tuple[int, str]]] = {}

    def enough() -> bool:
        for msg in consumer.consume(num_messages=100, timeout=0.5):
            assert msg.error() is None, msg.error()
            got.setdefault(msg.partition(), []).append((msg.offset(), msg.value().decode()))
        return sum(len(records) for records in got.values()) >= wanted

    local.wait_for(enough, WAIT_S, what, interval=0)
    return got


def _committed(admin: AdminClient, group: str, topic: str) -> dict[int, int]:
    """OffsetFetch through the AdminClient: {partition: committed offset}."""
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p) for p in range(PARTITIONS)])
    result = admin.list_consumer_group_offsets([request])[group].result(timeout=10)
    for tp in result.topic_partitions:
        assert tp.error is None, tp.error
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def _coordinator_id(admin: AdminClient, group: str) -> int:
    description = admin.describe_consumer_groups([group])[group].result(timeout=10)
    return description.coordinator.id


def _group_coordinated_by(local: LocalCluster, admin: AdminClient, *, controller: bool) -> str:
    """A fresh group id whose coordinator is (or is not) the controller.

    The offsets topic is created by the first FindCoordinator (here an OffsetFetch of a
    throwaway group); then every one of its partitions has a leader to choose from.
    """
    probe = ConsumerGroupTopicPartitions(f"probe-{uuid.uuid4().hex[:8]}")
    local.wait_for(lambda: admin.list_consumer_group_offsets([probe])[probe.group_id]
                   .result(timeout=10) is not None, WAIT_S,
                   "an OffsetFetch (FindCoordinator) to create the offsets topic")
    for p in range(OFFSETS_PARTITIONS):
        local.wait_for(lambda p=p: local.leader(OFFSETS_TOPIC, p) is not None, WAIT_S,
                       f"{OFFSETS_TOPIC}-{p} to have a leader")
    controller_id = local.controller_id()
    for attempt in range(1000):
        group = f"failover-{attempt}-{uuid.uuid4().hex[:8]}"
        leader = local.leader(OFFSETS_TOPIC, partition_for(group, OFFSETS_PARTITIONS))
        if (leader == controller_id) == controller:
            return group
    raise AssertionError(f"no group id maps to a partition led by {controller_id}")


# The coordinator-alone case is also suites/offsets' coordinator-crash test, which CI runs; it
# stays here (marked slow) for runs of the whole cluster-mode set.
@pytest.mark.parametrize("coordinator_is_controller", [
    pytest.param(False, id="coordinator-alone", marks=pytest.mark.slow),
    pytest.param(True, id="coordinator-and-controller")])
def test_committed_offsets_and_the_group_survive_a_coordinator_crash(
        cluster: MakeCluster, coordinator_is_controller: bool) -> None:
    """SIGKILL of the group coordinator: the new leader of the group's ``__consumer_offsets``
    partition serves exactly the synchronously committed offsets, a new consumer of the group
    resumes at them without re-delivery or gaps, and the group rebalances, consumes and
    commits (acks=all produce included) under the new coordinator.

    Both when the coordinator is only that, and when it is also the controller: then the
    dead broker is noticed by the controller that succeeds it, which must take it out of
    every ISR and leadership just as a live controller does (Kafka's controller failover marks
    the replicas of dead brokers offline)."""
    local = cluster(brokers=3, zookeeper_session_timeout_ms=4000,
                    properties={"group.initial.rebalance.delay.ms": 0,
                                "offsets.topic.num.partitions": OFFSETS_PARTITIONS})
    admin = AdminClient({"bootstrap.servers": local.bootstrap})
    topic = _create_topic(local, admin)
    records = _produce(local, topic, {
        p: [f"p{p}-{i}" for i in range(RECORDS_PER_PARTITION)] for p in range(PARTITIONS)})
    assert sorted(records) == [(p, o) for p in range(PARTITIONS)
                               for o in range(RECORDS_PER_PARTITION)]

    # A first member reads everything and commits a position per partition, synchronously.
    group = _group_coordinated_by(local, admin, controller=coordinator_is_controller)
    first = _consumer(local, group)
    try:
        first.subscribe([topic])
        _consume(local, first, PARTITIONS * RECORDS_PER_PARTITION,
                 "the first consumer to read every record")
        answer = first.commit(offsets=[TopicPartition(topic, p, o)
                                       for p, o in COMMITTED.items()], asynchronous=False)
        assert answer is not None and all(tp.error is None for tp in answer), answer
    finally:
        first.close()
    assert _committed(admin, group, topic) == COMMITTED

    # The coordinator is the leader of the group's offsets partition; crash it.
    offsets_partition = partition_for(group, OFFSETS_PARTITIONS)
    coordinator = local.leader(OFFSETS_TOPIC, offsets_partition)
    assert coordinator is not None
    assert _coordinator_id(admin, group) == coordinator
    assert (coordinator == local.controller_id()) == coordinator_is_controller
    state = local.partition_state(OFFSETS_TOPIC, offsets_partition)
    assert state is not None and sorted(state["isr"]) == [1, 2, 3], state
    local.kill(coordinator)
    new_coordinator = local.wait_for(
        lambda: (leader := local.leader(OFFSETS_TOPIC, offsets_partition)) != coordinator
        and leader, WAIT_S,
        f"a new leader of {OFFSETS_TOPIC}-{offsets_partition} after broker {coordinator} died")
    assert new_coordinator in {1, 2, 3} - {coordinator}

    # The new coordinator serves exactly what was committed.
    local.wait_for(lambda: _committed(admin, group, topic) == COMMITTED, WAIT_S,
                   "OffsetFetch from the new coordinator to return the committed offsets")
    assert _coordinator_id(admin, group) == new_coordinator

    # A new member resumes at the committed offsets: no re-delivery, no gap.
    second = _consumer(local, group)
    try:
        second.subscribe([topic])
        remaining = sum(RECORDS_PER_PARTITION - o for o in COMMITTED.values())
        resumed = _consume(local, second, remaining,
                           "the second consumer to read past the committed offsets")
        for partition, committed in COMMITTED.items():
            expected = [(o, records[(partition, o)])
                        for o in range(committed, RECORDS_PER_PARTITION)]
            assert resumed.get(partition) == expected, (partition, resumed.get(partition))
        assert sorted(tp.partition for tp in second.assignment()) == list(range(PARTITIONS))

        # The group works under the new coordinator: new records, a new commit.
        fresh = _produce(local, topic, {p: [f"p{p}-fresh"] for p in range(PARTITIONS)})
        got = _consume(local, second, PARTITIONS, "the second consumer to read new records")
        assert {(p, o): v for p, msgs in got.items() for o, v in msgs} == fresh
        positions = {p: o + 1 for p, o in fresh}
        answer = second.commit(offsets=[TopicPartition(topic, p, o)
                                        for p, o in positions.items()], asynchronous=False)
        assert answer is not None and all(tp.error is None for tp in answer), answer
        assert _committed(admin, group, topic) == positions
        description = admin.describe_consumer_groups([group])[group].result(timeout=10)
        assert len(description.members) == 1
        assert description.coordinator.id == new_coordinator
    finally:
        second.close()
