"""Unclean leader election, both ways, on one scenario: the whole ISR dies, an out-of-sync
replica is the only one left.

Kafka's contract (``unclean.leader.election.enable``, KIP-106 default ``false``):

* disabled — a partition whose ISR members are all dead stays offline (leader ``-1`` in its
  ZooKeeper state) even while an out-of-sync replica is alive; producing to it fails. When an
  ISR member comes back it becomes leader, and no acknowledged (``acks=all``) record is lost.
* enabled — the controller elects the live out-of-sync replica; the partition is available
  again, and exactly the acknowledged records that replica never received are lost. The
  topic-level config overrides the broker's and is read at election time, so turning it on
  at runtime with an AlterConfigs request unblocks an offline partition (the controller
  watches config changes), logging "Unclean leader election".

The scenario: replicas ``[1, 2, 3]`` (so broker 1 leads), ``min.insync.replicas=1``. Records
*before* are acknowledged while all three are in sync; broker 3 is stopped and leaves the ISR;
records *unreplicated* are acknowledged by the ISR ``[1, 2]`` only; brokers 1 and 2 are then
killed (SIGKILL) and broker 3 is started again, alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from harness.cluster.local import LocalCluster

MakeCluster = Callable[..., LocalCluster]
Record = tuple[int, str]  # (offset, value)

SPEC = {
    "brokers": 3,
    "zookeeper_session_timeout_ms": 4000,
    "min_insync_replicas": 1,
    "properties": {"replica.lag.time.max.ms": 2000},
}
ASSIGNMENT = [1, 2, 3]
OUT_OF_SYNC = 3
WAIT_S = 30.0


def _admin(local: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": local.bootstrap})


def _create_topic(local: LocalCluster) -> str:
    topic = f"unclean-{uuid.uuid4().hex[:8]}"
    admin = _admin(local)  # kept referenced until the result: a collected client cancels it
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=1, replica_assignment=[ASSIGNMENT],
                  config={"min.insync.replicas": "1"})], operation_timeout=20)
    futures[topic].result(timeout=30)
    local.wait_for(lambda: (local.partition_state(topic, 0) or {}).get("isr") == ASSIGNMENT
                   and local.leader(topic, 0) == ASSIGNMENT[0], WAIT_S,
                   f"{topic}-0 to be led by {ASSIGNMENT[0]} with ISR {ASSIGNMENT}")
    return topic


def _produce(local: LocalCluster, topic: str, values: list[str], *,
             timeout_ms: int = 15000) -> list[tuple[str, int | None, KafkaError | None]]:
    """Produce ``values`` one at a time with acks=all; (value, offset, error) per record."""
    outcomes: list[tuple[str, int | None, KafkaError | None]] = []

    def report(err: KafkaError | None, msg: object) -> None:
        value = msg.value().decode()  # type: ignore[attr-defined]
        offset = None if err is not None else msg.offset()  # type: ignore[attr-defined]
        outcomes.append((value, offset, err))

    producer = Producer({"bootstrap.servers": local.bootstrap, "acks": "all",
                         "message.timeout.ms": timeout_ms, "linger.ms": 0,
                         "enable.idempotence": False})
    try:
        for value in values:
            producer.produce(topic, value=value.encode(), partition=0, on_delivery=report)
            producer.flush(timeout_ms / 1000 + 5)
    finally:
        producer.flush(timeout_ms / 1000 + 5)
    assert len(outcomes) == len(values), f"deliveries reported: {outcomes}"
    return outcomes


def _produce_acknowledged(local: LocalCluster, topic: str, values: list[str]) -> list[Record]:
    outcomes = _produce(local, topic, values)
    failed = [(v, e) for v, _, e in outcomes if e is not None]
    assert not failed, f"acks=all produce failed: {failed}"
    return [(offset, value) for value, offset, _ in outcomes if offset is not None]


def _consume_all(local: LocalCluster, topic: str) -> list[Record]:
    """Every record of ``topic``-0 from the beginning up to the high watermark."""
    consumer = Consumer({"bootstrap.servers": local.bootstrap,
                         "group.id": f"reader-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        tp = TopicPartition(topic, 0)
        low, high = local.wait_for(
            lambda: consumer.get_watermark_offsets(tp, timeout=5), WAIT_S,
            f"the watermarks of {topic}-0")
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        records: list[Record] = []

        def read_to_high_watermark() -> bool:
            for msg in consumer.consume(num_messages=100, timeout=1):
                assert msg.error() is None, msg.error()
                records.append((msg.offset(), msg.value().decode()))
            return not records and high == low or bool(records) and records[-1][0] >= high - 1

        local.wait_for(read_to_high_watermark, WAIT_S,
                       f"{topic}-0 to be read up to its high watermark {high}")
        return records
    finally:
        consumer.close()


@dataclass
class Scenario:
    topic: str
    before: list[Record]          # acknowledged while broker 3 was in the ISR
    unreplicated: list[Record]    # acknowledged by the ISR [1, 2] only
    out_of_sync_log_end: int      # the high watermark when broker 3 left: all it has
    isr_left: list[int]           # the ISR once only broker 3 is alive


def _lose_the_isr(local: LocalCluster) -> Scenario:
    """Run the scenario up to "only broker 3 is alive"; the partition is then offline."""
    topic = _create_topic(local)
    before = _produce_acknowledged(local, topic, [f"before-{i}" for i in range(5)])
    state = local.partition_state(topic, 0)
    assert state is not None and OUT_OF_SYNC in state["isr"], state

    # Broker 3 leaves: it has exactly the records acknowledged so far, and no later ones.
    out_of_sync_log_end = before[-1][0] + 1
    local.stop_broker(OUT_OF_SYNC)
    in_sync = [b for b in ASSIGNMENT if b != OUT_OF_SYNC]
    local.wait_for(lambda: sorted(local.partition_state(topic, 0)["isr"]) == in_sync, WAIT_S,
                   f"broker {OUT_OF_SYNC} to leave the ISR of {topic}-0")

    unreplicated = _produce_acknowledged(local, topic,
                                         [f"unreplicated-{i}" for i in range(5)])
    assert [o for o, _ in unreplicated] == list(range(out_of_sync_log_end,
                                                      out_of_sync_log_end + 5))
    assert sorted(local.partition_state(topic, 0)["isr"]) == in_sync

    for broker_id in in_sync:  # a crash of the whole ISR, no controlled shutdown
        local.kill(broker_id)
    local.start_broker(OUT_OF_SYNC)
    assert local.running_broker_ids() == [OUT_OF_SYNC]
    local.wait_for(lambda: local.controller_id() == OUT_OF_SYNC, WAIT_S,
                   f"broker {OUT_OF_SYNC}, the only one alive, to be the controller")
    offline = local.wait_for(
        lambda: (s := local.partition_state(topic, 0)) is not None and s["leader"] == -1 and s,
        WAIT_S, f"{topic}-0 to have no leader (-1) once its ISR {in_sync} is dead")
    isr_left = list(offline["isr"])
    assert isr_left and set(isr_left) <= set(in_sync), offline
    return Scenario(topic, before, unreplicated, out_of_sync_log_end, isr_left)


def _assert_produce_fails(local: LocalCluster, topic: str) -> None:
    [(_, offset, error)] = _produce(local, topic, ["while-offline"], timeout_ms=3000)
    assert offset is None and error is not None, "a produce to an offline partition succeeded"


def _controller_log(local: LocalCluster) -> str:
    controller = local.controller_id()
    assert controller is not None
    return local.broker(controller).log_path.read_text(errors="replace")


@pytest.mark.slow  # the same scenario is suites/unclean's "disabled" test, which CI runs
def test_unclean_disabled_keeps_the_partition_offline_and_loses_nothing(
        cluster: MakeCluster) -> None:
    """Unclean election disabled (the default): with every ISR member dead, the live
    out-of-sync replica is not elected — the partition stays offline and produce fails; the
    first ISR member to return leads again with every acknowledged record."""
    local = cluster(**SPEC)
    scenario = _lose_the_isr(local)
    topic = scenario.topic

    _assert_produce_fails(local, topic)
    state = local.partition_state(topic, 0)
    assert state is not None and state["leader"] == -1, state
    assert "Unclean leader election" not in _controller_log(local)

    returning = scenario.isr_left[0]
    local.start_broker(returning)
    local.wait_for(lambda: local.leader(topic, 0) in scenario.isr_left, WAIT_S,
                   f"a member of the ISR {scenario.isr_left} to lead {topic}-0 again")
    assert local.leader(topic, 0) == returning

    acknowledged = scenario.before + scenario.unreplicated
    assert _consume_all(local, topic) == acknowledged
    assert "Unclean leader election" not in _controller_log(local)


def test_unclean_enabled_at_runtime_elects_the_out_of_sync_replica_and_loses_exactly_its_gap(
        cluster: MakeCluster) -> None:
    """Turning ``unclean.leader.election.enable`` on for the topic while its partition is
    offline (an IncrementalAlterConfigs at runtime) makes the controller elect the out-of-sync
    replica at once: the partition is available again, the acknowledged records that replica
    never received are lost and nothing else, later records reuse their offsets, and the
    controller logs "Unclean leader election"."""
    local = cluster(**SPEC)
    scenario = _lose_the_isr(local)
    topic = scenario.topic
    _assert_produce_fails(local, topic)  # still offline: the broker default is false

    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("unclean.leader.election.enable", "true",
                    incremental_operation=AlterConfigOpType.SET)])
    admin = _admin(local)
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)

    local.wait_for(lambda: local.leader(topic, 0) == OUT_OF_SYNC, WAIT_S,
                   f"the out-of-sync broker {OUT_OF_SYNC} to be elected for {topic}-0")
    state = local.partition_state(topic, 0)
    assert state is not None and state["isr"] == [OUT_OF_SYNC], state
    assert "Unclean leader election" in _controller_log(local)
    described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    [entries] = [f.result(timeout=30) for f in described.values()]
    assert entries["unclean.leader.election.enable"].value == "true"

    # What the test expects lost: acknowledged records at or past broker 3's log end.
    acknowledged = scenario.before + scenario.unreplicated
    expected_lost = [r for r in acknowledged if r[0] >= scenario.out_of_sync_log_end]
    expected_kept = [r for r in acknowledged if r[0] < scenario.out_of_sync_log_end]
    assert expected_lost == scenario.unreplicated and expected_kept == scenario.before

    survivors = _consume_all(local, topic)
    assert [r for r in acknowledged if r not in survivors] == expected_lost
    assert survivors == expected_kept

    # The partition takes writes again, and they reuse the lost records' offsets.
    after = _produce_acknowledged(local, topic, [f"after-{i}" for i in range(3)])
    assert [o for o, _ in after] == [o for o, _ in expected_lost[:3]]
    assert _consume_all(local, topic) == expected_kept + after

    # The loss stays visible: an old ISR member that comes back holds the lost records, and
    # following the new leader it cuts them off (OffsetsForLeaderEpoch) and says so in its log.
    returning = scenario.isr_left[0]
    local.start_broker(returning)
    local.wait_for(lambda: returning in local.partition_state(topic, 0)["isr"], WAIT_S,
                   f"broker {returning} to rejoin the ISR of {topic}-0")
    log_text = local.broker(returning).log_path.read_text()
    lost_end = expected_lost[-1][0] + 1
    assert (f"Truncating {topic}-0 from {lost_end} to {scenario.out_of_sync_log_end}"
            in log_text), "the returning replica did not log the truncation of the lost records"
