"""Apache Kafka 3.9 (ZooKeeper mode) on the docker backend: the same cluster as the reference
kind's, made of Kafka's own jars run on the image's JRE.

What is asserted is Kafka's behaviour as ZooKeeper records it, because that is also the proof
that the container wiring reaches a real Kafka: each broker registers one listener per source
broker, advertised at that pair's proxy in the Toxiproxy container (so an iptables cut of one
directed pair hits exactly that pair), and a leader cut off by iptables loses its partitions to
a broker the controller elects with a higher leader epoch.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import docker
import pytest
from confluent_kafka.admin import AdminClient

from harness.cluster.apache_kafka import CONTAINER_LIBS, ApacheKafkaKind, broker_listener
from harness.cluster.docker.backend import DockerCluster
from harness.cluster.docker.faults import IptablesPartitions
from harness.cluster.local import metadata_broker_ids
from harness.cluster.proxied import CLIENT, broker_node, link_name
from harness.cluster.proxy_faults import NetworkFaults
from harness.cluster.spec import ClusterSpec
from harness.nemesis import process as process_faults
from harness.net.ports import LOOPBACK

from .kafka_clients import QUIET, create_topic, labelled, produce_and_consume
from .kafka_nodes import with_jars

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]
LAG_MS = 3000  # replica.lag.time.max.ms: how long a follower may lag before the ISR drops it


def listen(cluster: DockerCluster, source: str, destination: str) -> str:
    """The address a link's proxy listens at (the host side of a published one)."""
    host, port, _ = cluster.links[link_name(source, destination)]
    return f"{host}:{port}"


@pytest.fixture(scope="module")
def kind() -> ApacheKafkaKind:
    return with_jars(ApacheKafkaKind())


@pytest.fixture(scope="module")
def kafka(engine: docker.DockerClient, project_image: str, kind: ApacheKafkaKind,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockerCluster]:
    """Three Kafka brokers in containers; after the module, nothing of the run is left."""
    spec = ClusterSpec(brokers=3, properties={"replica.lag.time.max.ms": LAG_MS,
                                              "group.initial.rebalance.delay.ms": 0})
    cluster = DockerCluster(spec, run_dir=tmp_path_factory.mktemp("docker-kafka"),
                            image=project_image, client=engine, kind=kind)
    with cluster:
        yield cluster
    assert labelled(engine, cluster.run_id) == []


@pytest.fixture
def healthy(kafka: DockerCluster) -> Iterator[DockerCluster]:
    """The cluster, and after the test: no partition, every broker running, registered and
    listing all three (a broker whose session expired behind a cut registers again alone)."""
    yield kafka
    IptablesPartitions(kafka).clear()
    for broker_id in kafka.spec.broker_ids:
        if kafka.broker(broker_id).status() == "paused":
            kafka.resume(broker_id)
        if not kafka.broker(broker_id).is_running():
            kafka.start_broker(broker_id)
    kafka.wait_for(lambda: kafka.registered_broker_ids() == [1, 2, 3], 90,
                   "every broker registered again")
    for broker_id in kafka.spec.broker_ids:
        kafka.wait_for(lambda b=broker_id: kafka.broker_metadata(b) == {1, 2, 3}, 90,
                       f"broker {broker_id}'s Metadata to list all three again")


def test_every_broker_lists_all_three_and_advertises_a_listener_per_source(kafka):
    for broker_id in kafka.spec.broker_ids:
        assert kafka.broker_metadata(broker_id) == {1, 2, 3}  # through its client proxy
        broker = kafka.broker(broker_id)
        assert metadata_broker_ids(broker.host, broker.port) == {1, 2, 3}  # its own listener
    for destination in kafka.spec.broker_ids:
        registration = kafka.broker_registration(destination)
        assert registration is not None
        endpoints = set(registration["endpoints"])
        for source in kafka.spec.broker_ids:
            # Where ``source`` dials ``destination``: the pair's proxy, or itself directly on
            # its listener for itself.
            expected = (f"{kafka.broker(destination).host}:"
                        f"{kafka.ports[destination].inbound[source]}" if source == destination
                        else listen(kafka, broker_node(source), broker_node(destination)))
            assert f"{broker_listener(source)}://{expected}" in endpoints
        client = listen(kafka, CLIENT, broker_node(destination))
        assert f"CLIENT://{client}" in endpoints
        assert client.startswith(f"{LOOPBACK}:")
        assert len(endpoints) == 4


def test_acks_all_produce_and_consume_through_the_client_proxies(kafka):
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap, **QUIET})
    advertised = {f"{b.host}:{b.port}" for b in admin.list_topics(timeout=10).brokers.values()}
    assert advertised == set(kafka.bootstrap.split(","))
    topic = create_topic(kafka)
    assert produce_and_consume(kafka, topic, 200) == [f"value-{i}".encode() for i in range(200)]


def test_an_iptables_isolated_leader_loses_leadership_to_a_higher_epoch(healthy):
    kafka = healthy
    topic = create_topic(kafka)
    before = kafka.partition_state(topic, 0)
    assert before is not None
    leader = before["leader"]
    partitions = IptablesPartitions(kafka)
    pairs = partitions.isolate(broker_node(leader))
    assert (broker_node(leader), "zk") in pairs
    assert broker_node(leader) in partitions.rules()

    def moved() -> dict | None:
        state = kafka.partition_state(topic, 0)
        return state if state and state["leader"] not in (leader, -1) else None

    # The isolated broker's ZooKeeper session expires (6 s), so the controller — another
    # broker, or a new one if the isolated broker was it — elects a leader from the ISR.
    after = kafka.wait_for(moved, 60, f"a leader of {topic}-0 other than broker {leader}")
    assert after["leader_epoch"] > before["leader_epoch"]
    assert leader not in kafka.registered_broker_ids()
    partitions.heal()
    assert partitions.rules() == {}
    kafka.wait_for(lambda: leader in kafka.partition_state(topic, 0)["isr"], 90,
                   f"broker {leader} to rejoin the ISR of {topic}-0 after the heal")


def test_a_latency_toxic_on_one_broker_pair_slows_that_pair_only(healthy):
    kafka = healthy
    faults = NetworkFaults(kafka)

    def round_trip(source: int, destination: int) -> float:
        """Metadata asked of ``destination`` through the pair's proxy in the Toxiproxy
        container (the host reaches it on the run's network), standing in for ``source``."""
        host, port, _ = kafka.links[link_name(broker_node(source), broker_node(destination))]
        started = time.monotonic()
        metadata_broker_ids(host, port, timeout=10)
        return time.monotonic() - started

    baseline = min(round_trip(1, 2) for _ in range(3))
    faults.add_toxic("broker-1->broker-2", "latency", {"latency": 400})
    try:
        slowed = min(round_trip(1, 2) for _ in range(3))
        other = min(round_trip(3, 2) for _ in range(3))
    finally:
        faults.clear()
    assert slowed >= baseline + 0.35, (baseline, slowed)
    assert other < 0.35, other


def test_process_faults_pause_stop_kill_and_lose_unflushed(healthy):
    kafka = healthy
    topic = create_topic(kafka)
    kafka.pause(3)
    with pytest.raises(OSError):
        metadata_broker_ids(LOOPBACK, kafka.links[link_name(CLIENT, "broker-3")][1], timeout=1.0)
    kafka.resume(3)
    assert kafka.broker_metadata(3) >= {3}
    assert process_faults.stop(kafka, "broker-3")["exit_code"] == 143  # the JVM on SIGTERM
    kafka.start_broker(3)
    assert kafka.kill(3) == 137
    kafka.start_broker(3)
    assert produce_and_consume(kafka, topic, 50) == [f"value-{i}".encode() for i in range(50)]
    cut = process_faults.lose_unflushed_node(kafka, "broker-3")
    assert f"{topic}-0" in cut["partitions"]
    assert kafka.broker(3).is_running()


def test_one_broker_up_produce_consume_and_down_leaves_nothing(engine, project_image, kind):
    cluster = DockerCluster(ClusterSpec(brokers=1), image=project_image, client=engine,
                            kind=kind)
    with cluster:
        # The image's copy of the distribution the kind found on the host (see its
        # image_directories): the same jars, so the same version.
        code, listing = cluster.containers["broker-1"].exec_run(["ls", CONTAINER_LIBS])
        assert code == 0
        assert sorted(listing.decode().split()) == sorted(
            path.name for path in kind.distribution.libs.iterdir())
        topic = create_topic(cluster, replication=1)
        assert produce_and_consume(cluster, topic, 20) == [f"value-{i}".encode()
                                                          for i in range(20)]
        assert len(labelled(engine, cluster.run_id)) == 5  # zk, broker, toxiproxy, net, volume
        broker_log = next(path for path in cluster.log_paths() if path.name == "broker-1.log")
        assert f"Kafka version: {kind.version()}" in broker_log.read_text()
    assert labelled(engine, cluster.run_id) == []
