"""The warm-up gate (harness/run/warm_up.py): which groups a run's clients form, and the wait
for them to be Stable with every member assigned, asked of a real reference broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.peers import ReferenceBroker
from harness.run.warm_up import STABLE, Described, GroupWant, groups_of, wait_until_warm
from harness.workload.consumer import ConsumerSpec
from harness.workload.context import QUIET
from harness.workload.generator import WorkloadSpec
from harness.workload.kinds import TxnIdPolicy, WorkloadKind
from harness.workload.plans import UNCOMMITTED_GROUP_SUFFIX, Plan
from harness.workload.producer import ProducerSpec

PARTITIONS = 3


def test_the_groups_of_a_run_are_its_group_consumers_and_processors():
    base = WorkloadSpec("b:1", ("t",), producers=2, consumers=3, group="g")
    assert groups_of(base.roles()) == [GroupWant("g", 3, ("t",))]
    assigned = WorkloadSpec("b:1", ("t",), consumers=2, consumer_mode="assign")
    assert groups_of(assigned.roles()) == []
    assert groups_of([("producer", ProducerSpec("b:1", ("t",)))]) == []
    txn = Plan(WorkloadKind.TRANSACTIONS, base, "t", 3, "run-x", 0.1, TxnIdPolicy.FRESH)
    assert groups_of(txn.roles()) == [GroupWant("g", 2, txn.topics),
                                      GroupWant(f"g{UNCOMMITTED_GROUP_SUFFIX}", 1, txn.topics)]
    ctp = Plan(WorkloadKind.CONSUME_TRANSFORM_PRODUCE, base, "t", 3, "run-x", 0.1,
               TxnIdPolicy.FRESH)
    (source, _) = ctp.topics
    assert groups_of(ctp.roles()) == [GroupWant("g", 3, (source,))]
    mixed = [("consumer", ConsumerSpec("b:1", ("a",), group="h")),
             ("consumer", ConsumerSpec("b:1", ("b",), group="h"))]
    assert groups_of(mixed) == [GroupWant("h", 2, ("a", "b"))]


def test_no_group_means_no_wait():
    assert wait_until_warm("127.0.0.1:1", [], PARTITIONS, lambda: pytest.fail("asked")) is None


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[ReferenceBroker]:
    with ReferenceBroker(tmp_path_factory.mktemp("broker"), properties={
            "offsets.topic.replication.factor": 1,
            "group.initial.rebalance.delay.ms": 0}) as running:
        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        admin.create_topics([NewTopic("warm", PARTITIONS, 1)])["warm"].result(10)
        yield running


@pytest.fixture
def consumers(broker, request) -> Iterator[list[Consumer]]:
    group = f"warm-{request.node.name}"
    started = [Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "session.timeout.ms": 6000, **QUIET}) for _ in range(2)]
    for consumer in started:
        consumer.subscribe(["warm"])
    yield started
    for consumer in started:
        consumer.close()


def _poll(consumers: list[Consumer]) -> None:
    for consumer in consumers:
        consumer.poll(0.05)


def test_the_gate_opens_once_the_group_is_stable_with_every_member_assigned(
        broker, consumers, request):
    want = GroupWant(f"warm-{request.node.name}", 2, ("warm",))
    assert wait_until_warm(broker.bootstrap, [want], PARTITIONS, lambda: _poll(consumers),
                           timeout_s=60) is None
    # Open means every member holds part of the topic by now.
    _poll(consumers)
    held = {tp.partition for consumer in consumers for tp in consumer.assignment()}
    assert held == set(range(PARTITIONS))


def test_a_group_short_of_members_times_out_into_a_note(broker, consumers, request):
    want = GroupWant(f"warm-{request.node.name}", 3, ("warm",))  # one member never comes
    note = wait_until_warm(broker.bootstrap, [want], PARTITIONS, lambda: _poll(consumers),
                           timeout_s=8)
    assert note is not None and "never became Stable" in note and want.group in note


def test_ready_means_stable_with_every_member_and_every_partition_held():
    want = GroupWant("g", 2, ("a", "b"))
    both = (frozenset({("a", 0), ("b", 0)}), frozenset({("a", 1), ("b", 1)}))
    assert Described(STABLE, both).ready(want, 2)
    assert not Described("CompletingRebalance", both).ready(want, 2)
    assert not Described(STABLE, both[:1]).ready(want, 2)  # a member short
    assert not Described(STABLE, (both[0], frozenset())).ready(want, 2)  # b/1 and a/1 unheld
    assert not Described(STABLE, (*both, frozenset())).ready(want, 2)  # a member too many
