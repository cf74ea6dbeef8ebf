"""Apache Kafka 3.9 (ZooKeeper mode, from its Maven jars) as a cluster the harness runs and faults.

One cluster of three real Kafka brokers behind the real Toxiproxy serves the module; every test
heals what it did. What is asserted is Kafka's own behaviour as ZooKeeper records it — the ISR a
leader shrinks, the leader a controller elects, ``/controller`` and its epoch — so these tests
also prove that the harness's wiring reaches a real Kafka: a cut on one directed pair of
brokers must hit exactly that pair (Kafka dials the address a peer advertises, so this needs
the per-source listeners of :mod:`harness.cluster.apache_kafka`).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.apache_kafka import ApacheKafkaKind
from harness.cluster.local import LocalCluster
from harness.cluster.proxied import ProxiedCluster, broker_node
from harness.cluster.proxy_faults import NetworkFaults
from harness.cluster.spec import ClusterSpec
from harness.nemesis import process as process_faults
from harness.waiting import wait_for

from .records import produce, read_all

LAG_MS = 3000  # replica.lag.time.max.ms: how long a follower may lag before the ISR drops it


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxiedCluster]:
    spec = ClusterSpec(brokers=3, properties={"replica.lag.time.max.ms": LAG_MS,
                                              "group.initial.rebalance.delay.ms": 0})
    cluster = ProxiedCluster(spec, run_dir=tmp_path_factory.mktemp("apache-kafka"),
                             kind=ApacheKafkaKind())
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def faults(kafka: ProxiedCluster) -> Iterator[NetworkFaults]:
    faults = NetworkFaults(kafka)
    yield faults
    faults.clear()
    nodes = kafka.cluster
    for broker_id, broker in nodes.brokers.items():
        if not broker.is_running():
            nodes.start_broker(broker_id)
    # A broker whose ZooKeeper session expired behind a cut registers again on its own, once
    # it can reach ZooKeeper: the next test needs all three.
    nodes.wait_for(lambda: nodes.registered_broker_ids() == [1, 2, 3], 60,
                   "every broker registered again after the heal")
    for broker_id in nodes.brokers:
        nodes.wait_for(lambda b=broker_id: nodes.broker_metadata(b) == {1, 2, 3}, 60,
                       f"broker {broker_id}'s Metadata to list all three again")


def _topic(kafka: ProxiedCluster, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    topic = NewTopic(name, 1, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([topic])[name].result(30)
    kafka.cluster.wait_for(lambda: len(_state(kafka, name)["isr"]) == 3, 30,
                           f"{name}'s ISR to hold all three brokers")
    return name


def _state(kafka: ProxiedCluster, topic: str) -> dict:
    state = kafka.cluster.partition_state(topic, 0)
    assert state is not None, f"no partition state for {topic}"
    return state


def test_acks_all_round_trip_on_three_kafka_brokers(kafka: ProxiedCluster) -> None:
    """Every broker's Metadata lists all three; acks=all records come back once, in order."""
    assert kafka.cluster.kind.version().startswith("3.9.")
    for broker_id in (1, 2, 3):
        assert kafka.cluster.broker_metadata(broker_id) == {1, 2, 3}
    topic = _topic(kafka, "round-trip")
    produce(kafka.bootstrap, topic, [f"value-{i}".encode() for i in range(500)])
    assert read_all(kafka.bootstrap, topic, 500) == [f"value-{i}".encode() for i in range(500)]


def test_isolating_the_leader_shrinks_the_isr_and_elects_another(
        kafka: ProxiedCluster, faults: NetworkFaults) -> None:
    """Cut off from ZooKeeper and its followers, the leader loses its session; the controller
    elects a leader from the rest of the ISR with a higher leader epoch, and the ISR leaves
    the isolated broker out."""
    topic = _topic(kafka, "isolate-leader")
    before = _state(kafka, topic)
    leader = before["leader"]
    faults.isolate(broker_node(leader))
    after = kafka.cluster.wait_for(
        lambda: (state := _state(kafka, topic))["leader"] not in (leader, -1) and state,
        30, f"a new leader for {topic} after isolating broker {leader}")
    assert after["leader_epoch"] > before["leader_epoch"]
    assert leader not in after["isr"]
    assert set(after["isr"]) == {1, 2, 3} - {leader}


def test_a_cut_between_two_brokers_hits_exactly_that_pair(
        kafka: ProxiedCluster, faults: NetworkFaults) -> None:
    """Only one follower's fetches to the leader are cut: after replica.lag.time.max.ms the
    leader drops exactly that follower from the ISR; the other follower, whose link is
    untouched, stays — a proxy per destination would have cut both.

    The cut follower is not the controller: the leader could not hear the controller's answer
    to its AlterPartition then, and the ISR in ZooKeeper would never change."""
    topic = _topic(kafka, "pair-cut")
    leader = _state(kafka, topic)["leader"]
    controller = kafka.cluster.controller_id()
    followers = sorted((b for b in (1, 2, 3) if b != leader), key=lambda b: b == controller)
    cut, kept = followers
    faults.partition({broker_node(leader): [broker_node(cut)]})
    assert faults.active()["partition"] == [[broker_node(cut), broker_node(leader)]]
    # The leader only notices lag while there is something to fetch. Not idempotent: an
    # idempotent producer may ask the cut follower for a producer id, and when the controller
    # is the leader that broker cannot get a block of ids behind the cut (Kafka logged "Timed
    # out when requesting AllocateProducerIds from the controller"; the send never completed).
    produce(kafka.bootstrap, topic, [f"value-{i}".encode() for i in range(10)], idempotent=False)
    # Waited for as one state, not asserted after the first shrink: on a busy machine the kept
    # follower may also fall LAG_MS behind for a moment and be dropped, then rejoin. Behind a
    # proxy per destination it could never rejoin, so reaching this state is the proof.
    shrunk = kafka.cluster.wait_for(
        lambda: sorted((state := _state(kafka, topic))["isr"]) == sorted([leader, kept])
        and state,
        LAG_MS / 1000 + 30, f"{topic}'s ISR to be exactly {sorted([leader, kept])} "
                            f"(broker {cut} out, broker {kept} in)")
    assert shrunk["leader"] == leader
    faults.heal()
    kafka.cluster.wait_for(lambda: len(_state(kafka, topic)["isr"]) == 3, 60,
                           f"broker {cut} back in {topic}'s ISR after the heal")


def test_killing_the_controller_moves_it_with_a_new_epoch(
        kafka: ProxiedCluster, faults: NetworkFaults) -> None:
    """A SIGKILLed controller's ephemeral ``/controller`` goes with its ZooKeeper session; a
    surviving broker takes over and ``/controller_epoch`` goes up by one."""
    nodes = kafka.cluster
    controller = nodes.wait_for(nodes.controller_id, 30, "a controller")
    epoch = nodes.controller_epoch()
    assert epoch is not None
    process_faults.kill(nodes, broker_node(controller))
    new = nodes.wait_for(lambda: (c := nodes.controller_id()) not in (None, controller) and c,
                         30, f"a controller other than broker {controller}")
    assert new in {1, 2, 3} - {controller}
    assert nodes.controller_epoch() == epoch + 1


def test_lose_unflushed_cuts_kafkas_logs_back_to_the_recovery_point(
        kafka: ProxiedCluster, faults: NetworkFaults) -> None:
    """Kafka checkpoints its recovery point once a minute (log.flush.offset.checkpoint.interval
    .ms), so a broker killed right after a write has it unflushed: lose-unflushed says which
    offsets it cut, the broker starts again on the cut logs, and the acks=all records are
    still there, from the replicas that kept them."""
    topic = _topic(kafka, "lose-unflushed")
    produce(kafka.bootstrap, topic, [f"value-{i}".encode() for i in range(200)])
    follower = next(b for b in (1, 2, 3) if b != _state(kafka, topic)["leader"])
    report = process_faults.lose_unflushed_node(kafka.cluster, broker_node(follower))
    cut = report["partitions"][f"{topic}-0"]
    assert cut["log_end_before"] == 200
    assert cut["log_end_after"] == cut["recovery_point"] < 200
    assert cut["offsets_lost"] == 200 - cut["recovery_point"]
    assert report["offsets_lost"] >= cut["offsets_lost"]
    assert kafka.cluster.broker(follower).is_running()
    kafka.cluster.wait_for(lambda: len(_state(kafka, topic)["isr"]) == 3, 60,
                           f"broker {follower} back in {topic}'s ISR")
    assert len(read_all(kafka.bootstrap, topic, 200)) == 200


def test_a_broker_whose_session_expires_during_its_startup_is_started_again(
        kafka: ProxiedCluster, faults: NetworkFaults) -> None:
    """Kafka exits when its own new ZooKeeper session expires before its startup is done, as
    a CPU-starved JVM's does (a loaded machine, a broker recovering its logs after a SIGKILL:
    a failover suite failed so on 2026-12-07). The harness starts it once more: here the
    starvation is a SIGSTOP of the starting broker, from its session's connection until
    ZooKeeper must have expired it."""
    nodes = kafka.cluster
    broker = nodes.broker(3)
    nodes.stop_broker(3)
    since = broker.log_path.stat().st_size
    failed: list[BaseException] = []

    def start() -> None:
        try:
            nodes.start_broker(3)
        except BaseException as exc:  # noqa: BLE001 - asserted below
            failed.append(exc)

    def log() -> str:
        return broker.log_path.read_bytes()[since:].decode(errors="replace")

    starting = threading.Thread(target=start)
    starting.start()
    try:
        wait_for(lambda: "[ZooKeeperClient Kafka server] Connected." in log(), 60,
                 "the starting broker's ZooKeeper session")
        pid = broker.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        try:
            # The fault's length, not a wait for an event: silent past the session's timeout.
            time.sleep(nodes.spec.zookeeper_session_timeout_ms / 1000 + 3)
        finally:
            os.kill(pid, signal.SIGCONT)
    finally:
        starting.join(180)
    assert not starting.is_alive() and not failed, failed
    assert log().count("Exiting Kafka due to fatal exception during startup") == 1
    assert broker.startup_session_expiries == 1 and broker.pid != pid
    assert nodes.broker_metadata(3) == {1, 2, 3}


def test_a_direct_cluster_without_proxies(tmp_path: pytest.TempPathFactory) -> None:
    """The same kind on the plain local backend: brokers dial each other directly."""
    with LocalCluster(ClusterSpec(brokers=2), run_dir=tmp_path, kind=ApacheKafkaKind()) as local:
        for broker_id in (1, 2):
            assert local.broker_metadata(broker_id) == {1, 2}
        assert local.registered_broker_ids() == [1, 2]
        pids = [broker.pid for broker in local.brokers.values()]
    assert all(pid is not None for pid in pids)
    assert not any(broker.is_running() for broker in local.brokers.values())
