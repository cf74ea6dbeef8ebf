"""The docker backend end to end: up, clients through the Toxiproxy container, partitions cut
by iptables inside the containers' namespaces, a toxic measured, process faults, and down
leaving nothing with the run's label behind."""

from __future__ import annotations

import signal
import subprocess
import textwrap
import time
import uuid

import docker
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.docker.backend import RUN_LABEL, DockerCluster
from harness.cluster.docker.faults import IptablesPartitions
from harness.cluster.local import metadata_broker_ids
from harness.cluster.proxy_faults import NetworkFaults
from harness.cluster.spec import ClusterSpec
from harness.net.ports import LOOPBACK

from ..processes import interruptible_python

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]
QUIET = {"log_level": 0}


def create_topic(cluster: DockerCluster, partitions: int = 1, replication: int = 3) -> str:
    name = f"docker-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
    admin.create_topics([NewTopic(name, partitions, replication)])[name].result(timeout=30)
    cluster.wait_for(lambda: cluster.leader(name, 0) is not None, 30, f"a leader for {name}")
    return name


def client_port(cluster: DockerCluster, broker_id: int) -> int:
    return cluster.links[f"client->broker-{broker_id}"][1]


def labelled(client: docker.DockerClient, run_id: str) -> list[str]:
    selector = {"label": f"{RUN_LABEL}={run_id}"}
    return ([c.name for c in client.containers.list(all=True, filters=selector)]
            + [n.name for n in client.networks.list(filters=selector)]
            + [v.name for v in client.volumes.list(filters=selector)])


def test_clients_reach_the_brokers_only_through_the_published_proxies(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
    advertised = {f"{b.host}:{b.port}" for b in admin.list_topics(timeout=10).brokers.values()}
    assert advertised == set(cluster.bootstrap.split(","))
    assert all(address.startswith(f"{LOOPBACK}:") for address in advertised)
    for container in cluster.containers.values():
        container.reload()
    published = [container.name for container in cluster.containers.values()
                 if any(container.ports.values())]
    assert published == [f"kafka-harness-{cluster.run_id}-toxiproxy"]

    topic = create_topic(cluster)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", **QUIET})
    for i in range(100):
        producer.produce(topic, f"value-{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": topic,
                         "auto.offset.reset": "earliest", **QUIET})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(values) < 100 and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    assert values == [f"value-{i}".encode() for i in range(100)]


def test_an_iptables_isolated_broker_leaves_the_isr_and_rejoins_after_heal(cluster):
    topic = create_topic(cluster)
    leader = cluster.leader(topic, 0)
    follower = next(b for b in cluster.spec.broker_ids if b != leader)
    cluster.wait_for(lambda: set(cluster.partition_state(topic, 0)["isr"]) == {1, 2, 3}, 30,
                     f"a full ISR for {topic}")
    partitions = IptablesPartitions(cluster)
    try:
        pairs = partitions.isolate(f"broker-{follower}")
        assert (f"broker-{follower}", "zk") in pairs
        assert NetworkFaults(cluster).active()["partition"] == []  # no toxic did this
        assert partitions.active()["partition"] == [list(pair) for pair in pairs]
        assert f"broker-{follower}" in partitions.rules()
        cluster.wait_for(lambda: follower not in cluster.partition_state(topic, 0)["isr"], 60,
                         f"broker {follower} to leave the ISR of {topic}-0")
    finally:
        IptablesPartitions(cluster).heal()  # the kernel holds the rules: any instance heals
    assert partitions.rules() == {}
    assert partitions.active() == {"partition": [], "toxics": {}}
    cluster.wait_for(lambda: follower in cluster.partition_state(topic, 0)["isr"], 90,
                     f"broker {follower} to rejoin the ISR of {topic}-0")


def test_an_iptables_cut_client_link_times_out_and_heals(cluster):
    partitions = IptablesPartitions(cluster)
    port = client_port(cluster, 1)
    assert metadata_broker_ids(LOOPBACK, port) == {1, 2, 3}
    try:
        partitions.partition({"broker-1": ["client"], "client": ["broker-1"]})
        started = time.monotonic()
        with pytest.raises(OSError):
            metadata_broker_ids(LOOPBACK, port, timeout=2.0)
        assert time.monotonic() - started >= 1.9  # a timeout, not a refusal
        assert metadata_broker_ids(LOOPBACK, client_port(cluster, 2)) == {1, 2, 3}
    finally:
        partitions.heal()
    assert cluster.wait_for(lambda: metadata_broker_ids(LOOPBACK, port), 30,
                            "broker 1 to answer through its proxy again") == {1, 2, 3}


def test_shapes_come_from_network_faults_and_are_cut_in_the_kernel(cluster):
    partitions = IptablesPartitions(cluster)
    try:
        pairs = partitions.halves()
        assert partitions.active()["partition"] == [list(pair) for pair in pairs]
        assert set(partitions.rules()) <= {"broker-1", "broker-2", "broker-3"}
    finally:
        partitions.clear()
    assert partitions.active() == {"partition": [], "toxics": {}}


def test_a_latency_toxic_in_the_toxiproxy_container_slows_that_link_only(cluster):
    def round_trip(broker_id: int) -> float:
        started = time.monotonic()
        metadata_broker_ids(LOOPBACK, client_port(cluster, broker_id), timeout=10)
        return time.monotonic() - started

    faults = NetworkFaults(cluster)
    baseline = min(round_trip(1) for _ in range(3))
    name = faults.add_toxic("client->broker-1", "latency", {"latency": 400})
    try:
        assert faults.active()["toxics"] == {"client->broker-1": [name]}
        slowed = min(round_trip(1) for _ in range(3))
        other = min(round_trip(2) for _ in range(3))
    finally:
        faults.clear()
    assert slowed >= baseline + 0.35, (baseline, slowed)
    assert other < 0.35, other
    assert faults.active() == {"partition": [], "toxics": {}}


def test_process_faults_pause_resume_kill_and_restart(cluster):
    cluster.pause(3)
    assert cluster.paused == {3}
    with pytest.raises(OSError):
        metadata_broker_ids(LOOPBACK, client_port(cluster, 3), timeout=1.0)
    cluster.resume(3)
    assert metadata_broker_ids(LOOPBACK, client_port(cluster, 3)) >= {3}
    assert cluster.kill(3) == 137
    assert cluster.running_broker_ids() == [1, 2]
    cluster.start_broker(3)
    cluster.wait_for(lambda: cluster.broker_registration(3) is not None, 30,
                     "broker 3 to register again")


def test_stop_removes_every_container_network_and_volume_of_the_run(engine, project_image):
    cluster = DockerCluster(ClusterSpec(brokers=1), image=project_image, client=engine)
    with cluster:
        assert len(labelled(engine, cluster.run_id)) == 5  # zk, broker, toxiproxy, network, volume
    assert labelled(engine, cluster.run_id) == []


def test_ctrl_c_leaves_nothing_behind(engine, project_image):
    script = textwrap.dedent(f"""
        from harness.cluster.docker.backend import DockerCluster
        from harness.cluster.spec import ClusterSpec
        import time
        with DockerCluster(ClusterSpec(brokers=1), image={project_image!r}) as cluster:
            print(cluster.run_id, flush=True)
            time.sleep(600)
    """)
    process = subprocess.Popen(interruptible_python(script), stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    run_id = process.stdout.readline().strip()
    assert run_id and labelled(engine, run_id)
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=120) != 0
    process.stdout.close()
    assert labelled(engine, run_id) == []
