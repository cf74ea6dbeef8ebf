"""Kafka's contract when a broker's only log dir fills up or fails its I/O (EIO), held on Apache
Kafka 3.9 and on the reference broker by one test body.

Apache Kafka (ZooKeeper mode) turns an IOException from a log dir into a log dir failure
(``LogDirFailureChannel``); ``ReplicaManager.handleLogDirFailure`` stops the dir's fetchers and
takes its partitions offline, and ``LogManager.handleLogDirFailure``, finding no live log dir
left, logs "Shutdown broker because all log dirs in ... have failed" and halts the JVM (exit
code 1). The write that failed is never acknowledged; the halted broker's ZooKeeper session
expires, the controller elects a leader from the ISR, and with acks=all and
min.insync.replicas=2 every acknowledged record is on that leader. Healing the disk and starting
the broker again brings it back into the ISR.

The same steps run on both kinds and their outcomes are compared field by field.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.apache_kafka import ApacheKafkaKind
from harness.cluster.kinds import BrokerKind
from harness.cluster.local import LocalCluster
from harness.cluster.reference_kind import REFERENCE
from harness.cluster.spec import ClusterSpec
from harness.disk.broker_disk import DiskFault, DiskLayer
from harness.disk.mounts import mounts_under
from harness.waiting import wait_for

TOPIC = "disk-full"
HALTED = "Shutdown broker because all log dirs in"
ACKED_BEFORE_FAULT = 300
ACKED_AFTER_FAULT = 300

pytestmark = pytest.mark.slow  # two three-broker clusters, a halt and a session expiry: ~60 s


@dataclass(frozen=True)
class Outcome:
    """What one kind did, in the terms the contract states."""

    exit_code: int | None     # the filled leader's process
    said_dir_failed: bool     # its log carries Kafka's "all log dirs ... have failed"
    leader_moved: bool        # a surviving replica leads
    acked: int                # records acknowledged (acks=all)
    lost: int                 # acknowledged records missing from a read of the partition
    rejoined_isr: bool        # back in the ISR once the disk was healed and it was restarted


class AckedProducer:
    """An acks=all producer writing numbered records until stopped, keeping what was acked."""

    def __init__(self, bootstrap: str) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                   "enable.idempotence": True, "message.timeout.ms": 60000,
                                   "linger.ms": 2})
        self.acked: set[bytes] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="acked-producer")

    def _delivered(self, err: object, msg: object) -> None:
        if err is None:
            with self._lock:
                self.acked.add(msg.value())  # type: ignore[attr-defined]

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            try:
                self._producer.produce(TOPIC, str(n).encode(), on_delivery=self._delivered)
                n += 1
            except BufferError:
                pass
            self._producer.poll(0.002)

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> set[bytes]:
        self._stop.set()
        self._thread.join()
        self._producer.flush(90)
        with self._lock:
            return set(self.acked)


def _read_all(bootstrap: str) -> set[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        partition = TopicPartition(TOPIC, 0, 0)
        _, high = consumer.get_watermark_offsets(partition, timeout=30)
        consumer.assign([partition])
        seen: set[bytes] = set()
        position = 0
        while position < high:
            for msg in consumer.consume(500, timeout=5):
                if msg.error() is None:
                    seen.add(msg.value())
                    position = msg.offset() + 1
        return seen
    finally:
        consumer.close()


def run_contract(kind: BrokerKind, run_dir: Path, fault: DiskFault = DiskFault.FULL) -> Outcome:
    """The steps of the module doc on ``kind``; ``fault`` ERRORS fails every read and write of
    the leader's log dir instead of filling its disk."""
    layer = DiskLayer.FAULTY if fault is DiskFault.ERRORS else DiskLayer.LIMITED
    spec = ClusterSpec(brokers=3, disk=layer, disk_size_mb=64,
                       properties={"replica.lag.time.max.ms": 5000})
    cluster = LocalCluster(spec, run_dir, kind=kind)
    cluster.start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})]
                            )[TOPIC].result(30)
        cluster.wait_for(lambda: len((cluster.partition_state(TOPIC, 0) or {}).get("isr", []))
                         == 3, 30, "the ISR to hold all three brokers")
        leader = cluster.leader(TOPIC, 0)
        assert leader is not None and leader > 0
        producer = AckedProducer(cluster.bootstrap)
        producer.start()
        try:
            wait_for(lambda: producer.count() >= ACKED_BEFORE_FAULT, 60, "acks before the fault")
            if fault is DiskFault.ERRORS:
                cluster.disk(leader).set_error_rate(1.0)
            else:
                cluster.disk(leader).fill()
            broker = cluster.broker(leader)
            cluster.wait_for(lambda: not broker.is_running(), 60,
                             f"broker {leader} to stop on its full log dir")
            exit_code = cluster.stop_broker(leader)  # reaps it: its exit code
            moved = cluster.wait_for(
                lambda: cluster.leader(TOPIC, 0) not in (None, -1, leader), 60,
                "a surviving replica to lead")
            after = producer.count()
            wait_for(lambda: producer.count() >= after + ACKED_AFTER_FAULT, 60,
                     "acks from the new leader")
        finally:
            acked = producer.stop()
        log = (run_dir / f"broker-{leader}" / f"{kind.log_name}.log").read_text(errors="replace")
        lost = acked - _read_all(cluster.bootstrap)
        cluster.disk(leader).heal()
        cluster.start_broker(leader)
        rejoined = cluster.wait_for(
            lambda: leader in (cluster.partition_state(TOPIC, 0) or {}).get("isr", []), 60,
            f"broker {leader} back in the ISR")
        return Outcome(exit_code, HALTED in log, bool(moved), len(acked), len(lost),
                       bool(rejoined))
    finally:
        cluster.stop()
        assert mounts_under(run_dir) == [], "a disk of the harness's is still mounted"


@pytest.mark.parametrize("fault", [DiskFault.FULL, DiskFault.ERRORS])
def test_a_failed_log_dir_halts_the_broker_moves_leadership_and_loses_nothing_acked(
        tmp_path: Path, fault: DiskFault):
    kafka = run_contract(ApacheKafkaKind(), tmp_path / "apache-kafka", fault)
    reference = run_contract(REFERENCE, tmp_path / "reference", fault)
    for name, outcome in (("apache-kafka", kafka), ("reference", reference)):
        assert outcome.exit_code == 1, f"{name}: the broker should halt with exit code 1"
        assert outcome.said_dir_failed, f"{name}: the log should say the log dir failed"
        assert outcome.leader_moved, f"{name}: leadership should move"
        assert outcome.acked >= ACKED_BEFORE_FAULT + ACKED_AFTER_FAULT
        assert outcome.lost == 0, f"{name}: {outcome.lost} acknowledged records lost"
        assert outcome.rejoined_isr, f"{name}: the healed broker should rejoin the ISR"
    same = ("exit_code", "said_dir_failed", "leader_moved", "lost", "rejoined_isr")
    assert {f: getattr(reference, f) for f in same} == {f: getattr(kafka, f) for f in same}
