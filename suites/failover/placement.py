"""What failover tests share: topics laid out on brokers the test chose, a producer that keeps
acknowledged records and their times (tests get it from the ``steady_producer`` fixture, which
stops its thread whatever happens), reading a partition back, and one broker's own view.

A failover test must know who leads and who follows before it breaks something, so its topic is
created with an explicit replica assignment and waited for until the metadata shows the first
replica (the preferred one) leading a full ISR. Observers talk to the brokers' own listeners,
never through the proxies a fault may be cutting.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition
from confluent_kafka.admin import NewTopic

from harness.cluster.targets import Target
from harness.raw_client import RawClient
from harness.waiting import wait_for

from ..support import unique_name, wait_for_topic

WAIT_S = 30.0
METADATA, METADATA_VERSION = 3, 12


@dataclass(frozen=True)
class Roles:
    """Three brokers by role, so a test can break a leader or a follower without also failing
    the controller over: ``first`` and ``second`` are not the active controller; ``third`` is
    the broker that is (ZooKeeper's /controller, or a combined KRaft node leading the quorum),
    or — where the controllers are nodes of their own — another broker. ``controller`` is the
    active controller's node id, a broker's only where ``colocated``."""

    first: int
    second: int
    third: int
    controller: int

    @property
    def colocated(self) -> bool:
        """Whether the active controller is one of the brokers (not a dedicated controller)."""
        return self.controller == self.third


def roles(cluster: Target) -> Roles:
    """The current roles; skips the test unless at least three brokers are running."""
    nodes = cluster.require_nodes()
    controller = wait_for(nodes.controller_id, WAIT_S, "a controller")
    running = sorted(nodes.running_broker_ids())
    others = [b for b in running if b != controller]
    third = controller if controller in running else others.pop() if len(others) > 2 else None
    if len(others) < 2 or third is None:
        pytest.skip(f"needs 3 running brokers, the target has {len(running)}")
    return Roles(others[0], others[1], third, controller)


def create_placed_topic(request: pytest.FixtureRequest, cluster: Target, admin: Any,
                        assignment: list[list[int]], config: dict[str, str] | None = None,
                        prefix: str = "") -> str:
    """A topic with ``assignment[p]`` as partition p's replicas; returns once each partition is
    led by its first replica with every replica in the ISR, and Metadata serves it."""
    topic = unique_name(request, prefix)
    futures = admin.create_topics(
        [NewTopic(topic, len(assignment), replica_assignment=assignment, config=config or {})],
        operation_timeout=30)
    futures[topic].result(60)
    nodes = cluster.require_nodes()

    def placed() -> bool:
        for partition, replicas in enumerate(assignment):
            state = nodes.partition_state(topic, partition)
            if not state or state["leader"] != replicas[0] or \
                    sorted(state["isr"]) != sorted(replicas):
                return False
        return True

    wait_for(placed, WAIT_S, f"{topic} to be led by {[r[0] for r in assignment]} with full ISRs")
    wait_for_topic(admin, topic, len(assignment))
    return topic


def state_of(cluster: Target, topic: str, partition: int = 0) -> dict[str, Any]:
    state = cluster.require_nodes().partition_state(topic, partition)
    assert state is not None, f"no state znode for {topic}-{partition}"
    return state


def wait_for_state(cluster: Target, topic: str, accept: Callable[[dict[str, Any]], bool],
                   what: str, timeout: float = WAIT_S) -> dict[str, Any]:
    """Partition 0's state znode once ``accept`` holds for it."""
    return wait_for(lambda: s if accept(s := state_of(cluster, topic)) else None, timeout,
                    f"{topic}-0 {what}")


def direct(cluster: Target, broker_id: int) -> tuple[str, int]:
    """The broker's own listener (not its proxy): what an observer of a fault connects to."""
    broker = cluster.require_nodes().broker(broker_id)
    assert broker.port is not None, f"broker {broker_id} has never started"
    return broker.host, broker.port


@dataclass(frozen=True)
class BrokerView:
    controller_id: int
    leaders: dict[int, int]  # partition -> leader, as this broker's Metadata says


def view_of(cluster: Target, broker_id: int, topic: str) -> BrokerView:
    """What ``broker_id`` itself answers to Metadata: its controller and the topic's leaders."""
    host, port = direct(cluster, broker_id)
    with RawClient(host, port, timeout=5.0) as raw:
        response = raw.request(METADATA, METADATA_VERSION, {
            "topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False})
    leaders = {p.partition_index: p.leader_id for t in response.topics if t.name == topic
               for p in t.partitions}
    return BrokerView(response.controller_id, leaders)


@dataclass
class SteadyProducer:
    """An acks=all idempotent producer sending unique values to one partition at a steady rate
    from its own thread, so a fault lands while sends are in flight; keeps what was acked and
    when (the delivery report's monotonic time), and what failed.

    An acknowledgement may come without an offset: when an idempotent producer retries a batch
    the leader already appended (its first answer was lost to the fault), the retry is answered
    as a duplicate and librdkafka reports the record delivered with no offset — Apache Kafka 3.9
    did so for one record under a follower cut. Those are kept apart and looked for by value.
    """

    make_producer: Callable[..., Any]
    topic: str
    interval_s: float = 0.02
    message_timeout_ms: int = 30000
    acked: dict[int, str] = field(default_factory=dict)  # offset -> value
    acked_without_offset: list[str] = field(default_factory=list)
    ack_times: list[float] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    sent: int = 0

    def __post_init__(self) -> None:
        self._client = self.make_producer(**{
            "acks": "all", "enable.idempotence": True, "linger.ms": 0,
            "message.timeout.ms": self.message_timeout_ms, "log.connection.close": False})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"steady-{self.topic}",
                                        daemon=True)

    def _report(self, err: KafkaError | None, msg: Any) -> None:
        if err is None:
            if msg.offset() is None or msg.offset() < 0:
                self.acked_without_offset.append(msg.value().decode())
            else:
                self.acked[msg.offset()] = msg.value().decode()
            self.ack_times.append(time.monotonic())
        else:
            self.failed.append((msg.value().decode(), err.name()))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._client.produce(self.topic, value=f"v{self.sent}".encode(), partition=0,
                                 on_delivery=self._report)
            self.sent += 1
            self._client.poll(self.interval_s)

    def start(self) -> SteadyProducer:
        self._thread.start()
        return self

    @property
    def acks(self) -> int:
        return len(self.acked) + len(self.acked_without_offset)

    def wait_for_acks(self, count: int, timeout: float = WAIT_S) -> None:
        """Wait until ``count`` more records than now are acknowledged."""
        target = self.acks + count
        wait_for(lambda: self.acks >= target, timeout, f"{count} more acks on {self.topic}")

    def lost_in(self, read: dict[int, str]) -> dict[str, int | None]:
        """The acknowledged values ``read`` (offset -> value) does not hold where they were
        acknowledged — or, for one acknowledged without an offset, anywhere — each with the
        offset of its acknowledgement."""
        lost: dict[str, int | None] = {
            value: offset for offset, value in self.acked.items() if read.get(offset) != value}
        values = set(read.values())
        lost.update((value, None) for value in self.acked_without_offset if value not in values)
        return lost

    def halt(self, timeout: float = WAIT_S) -> None:
        """Stop sending (the thread ends); outstanding sends are left to the client."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def stop(self, timeout: float = WAIT_S) -> None:
        """Stop sending and wait for every outstanding delivery report."""
        self.halt(timeout)
        remaining = self._client.flush(timeout)
        assert remaining == 0, f"{remaining} sends still unreported after {timeout:.0f} s"

    def max_ack_gap(self) -> float:
        """The longest time between two consecutive acknowledgements: how long writes stalled."""
        times = sorted(self.ack_times)
        return max((b - a for a, b in zip(times, times[1:], strict=False)), default=0.0)


def read_partition(make_consumer: Callable[..., Any], topic: str, partition: int = 0,
                   timeout: float = WAIT_S) -> dict[int, str]:
    """Every record of ``topic``-``partition`` from the start to its high watermark."""
    consumer = make_consumer(**{"enable.auto.commit": False, "enable.partition.eof": False})
    tp = TopicPartition(topic, partition)
    _, high = wait_for(lambda: consumer.get_watermark_offsets(tp, timeout=5, cached=False),
                       timeout, f"the watermarks of {topic}-{partition}")
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    records: dict[int, str] = {}

    def read_to_high_watermark() -> bool:
        for msg in consumer.consume(num_messages=500, timeout=0.5):
            assert msg.error() is None, msg.error()
            records[msg.offset()] = msg.value().decode()
        return max(records, default=-1) >= high - 1

    if high > 0:
        wait_for(read_to_high_watermark, timeout,
                 f"{topic}-{partition} to be read up to its high watermark {high}")
    return records
