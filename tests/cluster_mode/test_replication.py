"""Replication and failover on a real 3-broker ZooKeeper-mode cluster (issue 5).

Each test states the Kafka behaviour it checks: ISR replication and the high watermark
(Kafka's design docs, "Replication"), leader failover within the ISR, controller failover and
epoch fencing (KafkaController in ZooKeeper mode), min.insync.replicas for acks=all.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.spec import ClusterSpec
from harness.raw_client import RawClient
from harness.wire.records import build_batch

# One cluster for the module's tests but the min.insync.replicas one, which needs a short
# replica.lag.time.max.ms of its own (conftest.shared_cluster). A 4 s session, so a killed
# broker's leaderships move within seconds.
SESSION_MS = 4000
SHARED_CLUSTER = ClusterSpec(brokers=3, zookeeper_session_timeout_ms=SESSION_MS)

PRODUCE, LEADER_AND_ISR = 0, 4
STALE_CONTROLLER_EPOCH, NOT_ENOUGH_REPLICAS = 11, 19


def _create(bootstrap: str, topic: str, assignment: list[list[int]],
            config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, len(assignment), replica_assignment=assignment,
                                            config=config or {})])
    futures[topic].result(30)


def _produce(bootstrap: str, topic: str, count: int, prefix: str = "v") -> list[tuple[int, int]]:
    """acks=all, idempotent; returns (partition, offset) of every acknowledged record."""
    acked: list[tuple[int, int]] = []

    def on_delivery(err, msg) -> None:
        if err is None:
            acked.append((msg.partition(), msg.offset()))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, key=str(i).encode(), value=f"{prefix}{i}".encode(),
                         on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(60) == 0
    return acked


def _consume_all(bootstrap: str, topic: str, partitions: int, expected: int,
                 timeout: float = 40.0) -> dict[tuple[int, int], bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: dict[tuple[int, int], bytes] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(seen) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or (msg.error() and msg.error().code() == KafkaError._PARTITION_EOF):
                continue
            assert msg.error() is None, msg.error()
            seen[(msg.partition(), msg.offset())] = msg.value()
    finally:
        consumer.close()
    return seen


def _segment_bytes(cluster, broker_id: int, topic: str, partition: int) -> bytes:
    directory = cluster.broker(broker_id).data_dir / f"{topic}-{partition}"
    return b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))


def test_acks_all_leaves_three_byte_identical_replicas(shared_cluster):
    """Followers copy the leader's batches as they are (offsets, epochs, CRCs), so once the
    ISR has everything the three replicas' logs are the same bytes."""
    c = shared_cluster
    _create(c.bootstrap, "same", [[1, 2, 3], [2, 3, 1]])
    acked = _produce(c.bootstrap, "same", 3000)
    assert len(acked) == 3000
    for partition in (0, 1):
        logs = c.wait_for(
            lambda p=partition: (lambda got: got if len(set(got)) == 1 and got[0] else None)(
                [_segment_bytes(c, b, "same", p) for b in (1, 2, 3)]),
            30, f"the three replicas of same-{partition} to be byte-identical")
        assert len(logs[0]) > 0
        assert c.partition_state("same", partition)["isr"] == ([1, 2, 3] if partition == 0
                                                               else [2, 3, 1])


def test_killing_the_leader_elects_an_isr_member_and_loses_nothing_acked(shared_cluster):
    """A dead leader's partitions get a new leader from the live ISR once its ZooKeeper
    session expires (zookeeper.session.timeout.ms), with leader epoch + 1; every record that
    was acknowledged with acks=all is still there."""
    session_ms = SESSION_MS
    c = shared_cluster
    _create(c.bootstrap, "fail", [[1, 2, 3]])
    before = c.partition_state("fail", 0)
    acked = _produce(c.bootstrap, "fail", 2000, prefix="a")
    killed_at = time.monotonic()
    c.kill(1)
    state = c.wait_for(lambda: (s := c.partition_state("fail", 0)) and s["leader"] in (2, 3)
                       and s, session_ms / 1000 + 10, "a new leader for fail-0")
    elapsed = time.monotonic() - killed_at
    assert elapsed <= session_ms / 1000 + 5
    assert state["leader_epoch"] > before["leader_epoch"]
    assert 1 not in state["isr"]
    bootstrap = ",".join(f"127.0.0.1:{c.broker(b).port}" for b in (2, 3))
    acked += _produce(bootstrap, "fail", 500, prefix="b")
    seen = _consume_all(bootstrap, "fail", 1, len(acked))
    missing = sorted(set(acked) - set(seen))
    assert missing == [], f"acknowledged records lost: {missing[:10]}"


def test_controller_failover_bumps_the_epoch_and_fences_the_old_controller(shared_cluster):
    """Killing the controller moves /controller to another broker with /controller_epoch + 1;
    brokers then refuse a request stamped with the old epoch (STALE_CONTROLLER_EPOCH)."""
    session_ms = SESSION_MS
    c = shared_cluster
    _create(c.bootstrap, "fence", [[1, 2, 3]])
    old_controller, old_epoch = c.controller_id(), c.controller_epoch()
    c.kill(old_controller)
    new_controller = c.wait_for(
        lambda: (cid := c.controller_id()) is not None and cid != old_controller and cid,
        session_ms / 1000 + 10, "another broker to become controller")
    assert c.controller_epoch() == old_epoch + 1
    survivor = next(b for b in (1, 2, 3) if b != old_controller)
    # Metadata converges: every live broker names the new controller.
    for broker_id in (b for b in (1, 2, 3) if b != old_controller):
        c.wait_for(lambda b=broker_id: _controller_seen_by(c, b) == new_controller, 15,
                   f"broker {broker_id} to name controller {new_controller}")
    with RawClient("127.0.0.1", c.broker(survivor).port) as raw:
        response = raw.request(LEADER_AND_ISR, 4, {
            "controller_id": old_controller, "controller_epoch": old_epoch,
            "broker_epoch": -1, "topic_states": [{"topic_name": "fence", "partition_states": [
                {"partition_index": 0, "controller_epoch": old_epoch, "leader": survivor,
                 "leader_epoch": 99, "isr": [survivor], "zk_version": 0,
                 "replicas": [1, 2, 3]}]}], "live_leaders": []})
    assert int(response.error_code) == STALE_CONTROLLER_EPOCH
    assert c.partition_state("fence", 0)["leader_epoch"] < 99


def _controller_seen_by(c, broker_id: int) -> int:
    with RawClient("127.0.0.1", c.broker(broker_id).port) as raw:
        return raw.request(3, 12, {"topics": [], "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False}).controller_id


def test_acks_all_refused_when_isr_is_below_min_insync_replicas(cluster):
    """acks=all with fewer in-sync replicas than min.insync.replicas is refused before the
    append with NOT_ENOUGH_REPLICAS; acks=1 still succeeds."""
    c = cluster(brokers=3, zookeeper_session_timeout_ms=SESSION_MS,
                properties={"replica.lag.time.max.ms": 1500})
    _create(c.bootstrap, "strict", [[1, 2, 3]], {"min.insync.replicas": "3"})
    c.kill(3)
    c.wait_for(lambda: 3 not in c.partition_state("strict", 0)["isr"], 20,
               "broker 3 to leave the ISR of strict-0")
    leader = c.partition_state("strict", 0)["leader"]
    c.wait_for(lambda: 3 not in _isr_seen_by(c, leader, "strict"), 10,
               "the leader to know the shrunk ISR")
    with RawClient("127.0.0.1", c.broker(leader).port) as raw:
        for acks, expected in ((-1, NOT_ENOUGH_REPLICAS), (1, 0)):
            response = raw.request(PRODUCE, 9, {"acks": acks, "timeout": 5000, "topic_data": [
                {"name": "strict", "partition_data": [
                    {"index": 0, "records": build_batch([(b"k", b"v")])}]}]})
            got = response.responses[0].partition_responses[0].error_code
            assert int(got) == expected, (acks, got)


def _isr_seen_by(c, broker_id: int, topic: str) -> list[int]:
    with RawClient("127.0.0.1", c.broker(broker_id).port) as raw:
        response = raw.request(3, 12, {"topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
                                       "allow_auto_topic_creation": False,
                                       "include_topic_authorized_operations": False})
    return list(response.topics[0].partitions[0].isr_nodes)


def test_a_duplicate_broker_id_is_a_start_up_error_and_harms_nobody(shared_cluster, tmp_path):
    """A second broker with a live broker's id finds /brokers/ids/[id] owned by another
    session and refuses to start (exit 1, the reason logged); the live broker keeps its
    registration and its leaderships."""
    from harness.cluster.errors import PeerStartError
    from harness.cluster.peers import ReferenceBroker
    from harness.net.ports import free_port

    c = shared_cluster
    _create(c.bootstrap, "dup", [[1, 2, 3]])
    before = c.partition_state("dup", 0)
    registration = c.broker_registration(1)
    impostor = ReferenceBroker(tmp_path / "impostor", port=free_port(), properties={
        "broker.id": 1, "zookeeper.connect": c.zookeeper.connect_string}, startup_timeout=30)
    try:
        impostor.start()
        raise AssertionError("a broker with a duplicate broker.id started")
    except PeerStartError:
        pass
    finally:
        impostor.stop()
    assert "already registered" in impostor.log_path.read_text()
    time.sleep(1)
    assert c.broker_registration(1) == registration
    assert c.partition_state("dup", 0) == before
