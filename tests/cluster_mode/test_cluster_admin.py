"""Administration on a real 3-broker ZooKeeper-mode cluster: controlled shutdown, preferred
replica election (ElectLeaders), topic deletion, new partitions, and the leader-epoch errors
clients rely on (KIP-320)."""

from __future__ import annotations

import json
import uuid

from confluent_kafka import ElectionType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from harness.cluster.spec import ClusterSpec
from harness.raw_client import RawClient

# One cluster for the module's tests but the last (conftest.shared_cluster). A 30 s session:
# a leader change within it can only come from a controlled shutdown, not a session expiry.
# No automatic leader rebalance: the tests that bring a preferred replica back see where
# leadership is before anyone moves it (the last test turns it on, on a cluster of its own).
SHARED_CLUSTER = ClusterSpec(brokers=3, zookeeper_session_timeout_ms=30000,
                             properties={"auto.leader.rebalance.enable": "false"})

FETCH, OFFSET_FOR_LEADER_EPOCH = 1, 23
FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER = 74, 75, 6


def _admin(c) -> AdminClient:
    return AdminClient({"bootstrap.servers": c.bootstrap})


def test_controlled_shutdown_moves_leadership_before_the_broker_stops(shared_cluster):
    """A broker stopped with SIGTERM asks the controller to move its leaderships first
    (ControlledShutdown): its partitions get new leaders from the ISR at once, not after a
    session timeout, and acks=all writes keep succeeding."""
    c = shared_cluster
    admin = _admin(c)
    admin.create_topics([NewTopic("calm", 1, replica_assignment=[[2, 3, 1]])])["calm"].result(30)
    before = c.partition_state("calm", 0)
    assert before["leader"] == 2
    assert c.stop_broker(2) == 0
    # The session timeout is 30 s: a leader change now can only come from controlled shutdown.
    state = c.partition_state("calm", 0)
    assert state["leader"] in (3, 1) and state["leader_epoch"] > before["leader_epoch"]
    assert 2 not in state["isr"]
    assert "Controlled shutdown succeeded" in c.broker(2).log_path.read_text()
    bootstrap = ",".join(f"127.0.0.1:{c.broker(b).port}" for b in (1, 3))
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce("calm", b"after")
    assert producer.flush(30) == 0


def test_elect_leaders_moves_leadership_back_to_the_preferred_replica(shared_cluster):
    """After the preferred replica (first in the assignment) returns as a follower, the
    ElectLeaders API (election type PREFERRED) makes it leader again once it is in the ISR."""
    c = shared_cluster
    admin = _admin(c)
    admin.create_topics([NewTopic("pref", 1, replica_assignment=[[3, 1, 2]])])["pref"].result(30)
    c.stop_broker(3)
    assert c.leader("pref", 0) != 3
    c.start_broker(3)
    c.wait_for(lambda: 3 in c.partition_state("pref", 0)["isr"], 30, "broker 3 back in the ISR")
    assert c.leader("pref", 0) != 3
    # A fresh client: the first one still has broker 3 cached as the controller, which it was
    # before it stopped (ElectLeaders goes to the controller; others answer NOT_CONTROLLER).
    admin = _admin(c)
    # The controller learns of the ISR expansion through /isr_change_notification, a moment
    # after the partition state shows it; until then the answer is PREFERRED_LEADER_NOT_AVAILABLE.
    c.wait_for(lambda: admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("pref", 0)])
               .result(30)[TopicPartition("pref", 0)] is None, 15,
               "ElectLeaders(PREFERRED) to succeed for pref-0")
    assert c.leader("pref", 0) == 3


def test_delete_topic_removes_znodes_and_every_replica(shared_cluster):
    """DeleteTopics in ZooKeeper mode writes /admin/delete_topics/[t]; the controller stops and
    deletes every replica (StopReplica delete=true) and removes the topic's znodes."""
    c = shared_cluster
    admin = _admin(c)
    admin.create_topics([NewTopic("doomed", 2, 3)])["doomed"].result(30)
    producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce("doomed", b"%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    dirs = [c.broker(b).data_dir / f"doomed-{p}" for b in (1, 2, 3) for p in (0, 1)]
    assert all(d.is_dir() for d in dirs)
    admin.delete_topics(["doomed"])["doomed"].result(30)
    with c.zk() as zk:
        c.wait_for(lambda: zk.exists("/brokers/topics/doomed") is None
                   and not zk.get_children("/admin/delete_topics"), 30,
                   "the topic's znodes and the deletion request to go")
    c.wait_for(lambda: not any(d.exists() for d in dirs), 30, "every replica's log to go")
    assert "doomed" not in admin.list_topics(timeout=10).topics


def test_create_partitions_gives_the_new_partitions_leaders(shared_cluster):
    c = shared_cluster
    admin = _admin(c)
    admin.create_topics([NewTopic("grow", 1, 3)])["grow"].result(30)
    admin.create_partitions([NewPartitions("grow", 3)])["grow"].result(30)
    c.wait_for(lambda: all((c.leader("grow", p) or -1) >= 0 for p in range(3)), 30,
               "leaders for the new partitions")
    c.wait_for(lambda: len(admin.list_topics("grow", timeout=10).topics["grow"].partitions) == 3,
               30, "metadata to show 3 partitions")


def test_leader_epoch_errors_for_clients(shared_cluster):
    """KIP-320: a fetch naming an older leader epoch is FENCED_LEADER_EPOCH, a newer one
    UNKNOWN_LEADER_EPOCH. A follower answers a consumer's Fetch v10 with NOT_LEADER_OR_FOLLOWER
    and serves v11+ (KIP-392), as Apache Kafka 3.9 does."""
    c = shared_cluster
    admin = _admin(c)
    admin.create_topics([NewTopic("epochs", 1, replica_assignment=[[1, 2, 3]])])["epochs"] \
        .result(30)
    c.stop_broker(1)
    c.start_broker(1)
    state = c.wait_for(lambda: (s := c.partition_state("epochs", 0)) and 1 in s["isr"] and s,
                       30, "broker 1 back in the ISR")
    leader, epoch = state["leader"], state["leader_epoch"]
    follower = next(b for b in (1, 2, 3) if b != leader)

    def fetch(broker: int, current_epoch: int, version: int = 12) -> int:
        body = {
            "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "epochs", "topic_id": uuid.UUID(int=0), "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                 "current_leader_epoch": current_epoch, "log_start_offset": -1,
                 "last_fetched_epoch": -1}]}],
            "forgotten_topics_data": []}
        if version >= 11:
            body["rack_id"] = ""  # client metadata: a follower may answer (KIP-392)
        with RawClient("127.0.0.1", c.broker(broker).port) as raw:
            response = raw.request(FETCH, version, body)
        return int(response.responses[0].partitions[0].error_code)

    assert epoch >= 1
    assert fetch(leader, epoch) == 0
    assert fetch(leader, epoch - 1) == FENCED_LEADER_EPOCH
    assert fetch(leader, epoch + 1) == UNKNOWN_LEADER_EPOCH
    assert fetch(follower, -1, version=10) == NOT_LEADER_OR_FOLLOWER
    assert fetch(follower, -1) == 0
    with RawClient("127.0.0.1", c.broker(leader).port) as raw:
        response = raw.request(OFFSET_FOR_LEADER_EPOCH, 4, {
            "replica_id": -1, "topics": [{"topic": "epochs", "partitions": [
                {"partition": 0, "current_leader_epoch": epoch - 1, "leader_epoch": 0}]}]})
    assert int(response.topics[0].partitions[0].error_code) == FENCED_LEADER_EPOCH


def test_partition_reassignment_moves_the_replicas_and_their_data(shared_cluster):
    """Writing /admin/reassign_partitions (what kafka-reassign-partitions does in ZooKeeper
    mode): the new replica copies the log and joins the ISR, the assignment is rewritten, the
    dropped replica's log is deleted, and the request znode goes away."""
    c = shared_cluster
    admin = _admin(c)
    admin.create_topics([NewTopic("moving", 1, replica_assignment=[[1, 2]])])["moving"] \
        .result(30)
    producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    for i in range(200):
        producer.produce("moving", b"%d" % i)
    assert producer.flush(30) == 0
    with c.zk() as zk:
        zk.create("/admin/reassign_partitions", json.dumps({"version": 1, "partitions": [
            {"topic": "moving", "partition": 0, "replicas": [2, 3]}]}).encode())
        c.wait_for(lambda: zk.exists("/admin/reassign_partitions") is None, 60,
                   "the reassignment to complete")
        assignment = json.loads(zk.get("/brokers/topics/moving")[0])["partitions"]
    assert assignment == {"0": [2, 3]}
    state = c.partition_state("moving", 0)
    assert sorted(state["isr"]) == [2, 3] and state["leader"] in (2, 3)
    c.wait_for(lambda: not (c.broker(1).data_dir / "moving-0").exists(), 30,
               "broker 1's replica to be deleted")
    logs = [b"".join(p.read_bytes() for p in sorted((c.broker(b).data_dir / "moving-0")
                                                    .glob("*.log"))) for b in (2, 3)]
    assert logs[0] == logs[1] and logs[0]


def test_auto_leader_rebalance_restores_the_preferred_leader(cluster):
    """With auto.leader.rebalance.enable the controller periodically moves leadership back to
    preferred replicas once a broker's imbalance exceeds leader.imbalance.per.broker.percentage."""
    c = cluster(brokers=3, properties={"leader.imbalance.check.interval.seconds": 1,
                                       "leader.imbalance.per.broker.percentage": 0})
    admin = _admin(c)
    admin.create_topics([NewTopic("home", 1, replica_assignment=[[3, 1, 2]])])["home"] \
        .result(30)
    c.stop_broker(3)
    assert c.leader("home", 0) != 3
    c.start_broker(3)
    c.wait_for(lambda: c.leader("home", 0) == 3, 30,
               "the controller to give leadership back to broker 3")
