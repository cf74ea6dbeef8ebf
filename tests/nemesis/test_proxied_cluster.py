"""A ProxiedCluster: every link through a proxy, real clients work, nothing outlives stop()."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import requests
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.proxied import ProxiedCluster
from harness.cluster.spec import ClusterSpec
from harness.net.ports import LOOPBACK, is_accepting
from harness.net.toxiproxy_api import VERSION
from harness.net.toxiproxy_process import ToxiproxyServerKind, find_toxiproxy_server
from harness.waiting import wait_for

from .conftest import api_versions_round_trip, listen_port

QUIET = {"log_level": 0}
CONSUME_TIMEOUT_S = 60
# One cluster for the tests that only use it (conftest.shared_proxied_cluster); the others
# start and stop clusters of their own, which is what they test. The group's first join does
# not wait for more members.
SHARED_CLUSTER = ClusterSpec(brokers=3, properties={"group.initial.rebalance.delay.ms": 0})


def test_clients_produce_and_consume_through_the_client_proxies(shared_proxied_cluster):
    cluster = shared_proxied_cluster
    assert cluster.nodes == ["zk", "broker-1", "broker-2", "broker-3", "client"]
    assert sorted(cluster.links) == sorted(
        [f"client->broker-{i}" for i in (1, 2, 3)]
        + [f"broker-{i}->broker-{j}" for i in (1, 2, 3) for j in (1, 2, 3) if i != j]
        + [f"broker-{i}->zk" for i in (1, 2, 3)])
    proxies = {f"{host}:{port}" for host, port, _ in cluster.links.values()}
    assert set(cluster.bootstrap.split(",")) <= proxies
    assert not set(cluster.direct_bootstrap.split(",")) & proxies

    topic = f"through-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(timeout=30)
    metadata = admin.list_topics(timeout=10)
    advertised = {f"{b.host}:{b.port}" for b in metadata.brokers.values()}
    assert advertised == set(cluster.bootstrap.split(",")), "brokers advertise their proxies"

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", **QUIET})
    values = [f"value-{n}".encode() for n in range(30)]
    for n, value in enumerate(values):
        producer.produce(topic, value, partition=n % 3)
    assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "g-" + topic,
                        "auto.offset.reset": "earliest", **QUIET})
    consumer.subscribe([topic])
    seen: list[bytes] = []

    def consumed_all() -> bool:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append(message.value())
        return len(seen) >= len(values)

    try:
        # Until every value is in, by a deadline rather than a count of polls: the group's
        # first join waits for its coordinator, which takes longer on a loaded machine.
        wait_for(consumed_all, CONSUME_TIMEOUT_S, f"the {len(values)} values to be consumed",
                 interval=0)
    finally:
        consumer.close()
    assert sorted(seen) == sorted(values)


def test_brokers_reach_each_other_and_zookeeper_through_their_proxies(shared_proxied_cluster):
    cluster = shared_proxied_cluster
    for broker_id in (1, 2, 3):
        text = (cluster.run_dir / f"broker-{broker_id}" / "server.properties").read_text()
        props = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        peers = dict(entry.split("=") for entry in props["broker.peer.addresses"].split(","))
        own = cluster.cluster.broker(broker_id).port
        assert peers == {
            str(peer): f"{LOOPBACK}:{listen_port(cluster, f'broker-{broker_id}->broker-{peer}')}"
            if peer != broker_id else f"{LOOPBACK}:{own}"  # a controller reaches itself directly
            for peer in (1, 2, 3)}
        assert props["zookeeper.connect"] == (
            f"{LOOPBACK}:{listen_port(cluster, f'broker-{broker_id}->zk')}")
        assert props["advertised.listeners"] == (
            f"PLAINTEXT://{LOOPBACK}:{listen_port(cluster, f'client->broker-{broker_id}')}")
        registration = cluster.cluster.broker_registration(broker_id)
        assert registration["port"] == listen_port(cluster, f"client->broker-{broker_id}")
    for host, port, _ in cluster.links.values():
        assert host == LOOPBACK and is_accepting(host, port)
    # The proxy and the broker answer the same raw request.
    for broker_id in (1, 2, 3):
        api_versions_round_trip(listen_port(cluster, f"client->broker-{broker_id}"))
        api_versions_round_trip(cluster.cluster.broker(broker_id).port)


def test_stop_leaves_no_process_and_no_listening_port(tmp_path):
    cluster = ProxiedCluster(ClusterSpec(brokers=3), run_dir=tmp_path).start()
    try:
        pids = [cluster.server_pid, cluster.cluster.zookeeper.pid,
                *(broker.pid for broker in cluster.cluster.brokers.values())]
        ports = [port for _, port, _ in cluster.links.values()]
        ports += [int(cluster.toxiproxy_url.rsplit(":", 1)[1]), cluster.cluster.zookeeper.port]
        ports += [broker.port for broker in cluster.cluster.brokers.values()]
        assert all(pid is not None for pid in pids)
        assert all(is_accepting(LOOPBACK, port) for port in ports)
        server = cluster.toxiproxy_server
        assert server.kind is ToxiproxyServerKind.REAL, "the real server is the default"
        assert server.binary == find_toxiproxy_server() and server.url == cluster.toxiproxy_url
        assert server.describe() == f"real v{VERSION.partition('+')[0]}"
    finally:
        cluster.stop()
    for pid in pids:
        assert not _alive(pid), f"pid {pid} outlived stop()"
    assert [port for port in ports if is_accepting(LOOPBACK, port)] == []
    assert cluster.links == {} and cluster.proxies == {}
    cluster.stop()  # twice is fine


def test_an_external_toxiproxy_from_the_environment_is_used_and_left_clean(monkeypatch, tmp_path):
    with subprocess.Popen([sys.executable, "-m", "harness.net.toxiproxy_server", "--port", "0"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as server:
        try:
            line = server.stdout.readline()
            url = "http://" + line.removeprefix("listening on ").strip()
            # A proxy of the same name, left by a crashed run, is replaced.
            stale = requests.post(f"{url}/proxies", timeout=5, json={
                "name": "client->broker-1", "upstream": f"{LOOPBACK}:9"})
            assert stale.status_code == 201
            monkeypatch.setenv("TOXIPROXY_URL", url)
            with ProxiedCluster(ClusterSpec(brokers=2), run_dir=tmp_path) as cluster:
                assert cluster.toxiproxy_url == url and cluster.server_pid is None
                assert cluster.toxiproxy_server.kind is ToxiproxyServerKind.EXTERNAL
                assert cluster.toxiproxy_server.describe() == f"external v{VERSION} at {url}"
                served = requests.get(f"{url}/proxies", timeout=5).json()
                assert set(served) == set(cluster.links)
                assert served["client->broker-1"]["upstream"] != f"{LOOPBACK}:9"
                api_versions_round_trip(listen_port(cluster, "client->broker-1"))
            assert requests.get(f"{url}/proxies", timeout=5).json() == {}
            assert server.poll() is None, "an external server is not ours to stop"
        finally:
            server.terminate()
            server.wait(10)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
