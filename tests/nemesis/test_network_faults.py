"""Each network fault's effect, measured on a real 3-broker cluster behind proxies."""

from __future__ import annotations

import os
import statistics
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.proxy_faults import NetworkFaults
from harness.cluster.spec import ClusterSpec
from harness.net.ports import LOOPBACK
from harness.raw_client import RawClient
from harness.wire import protocol
from harness.wire.records import build_batch

from .conftest import api_versions_round_trip, listen_port

PRODUCE = 0
QUIET = {"log_level": 0}
# One cluster for the module (conftest.shared_proxied_cluster): each test faults links and the
# fixture lifts every fault after it. A follower cut off for 1.5 s leaves the ISR.
SHARED_CLUSTER = ClusterSpec(brokers=3, properties={"replica.lag.time.max.ms": 1500})


def create_topic(cluster, partitions: int, replication: int) -> str:
    name = f"faults-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
    admin.create_topics([NewTopic(name, partitions, replication)])[name].result(timeout=30)
    return name


def test_an_isolated_broker_leaves_the_isr_and_heal_brings_it_back(shared_proxied_cluster):
    cluster = shared_proxied_cluster
    zk = cluster.cluster
    topic = create_topic(cluster, 3, 3)
    followed = zk.wait_for(
        lambda: [p for p in range(3) if zk.leader(topic, p) not in (None, 3)
                 and set(zk.partition_state(topic, p)["isr"]) == {1, 2, 3}],
        30, "a partition broker 3 follows with a full ISR")
    partition = followed[0]
    faults = NetworkFaults(cluster)

    pairs = faults.isolate("broker-3")
    assert ("broker-3", "broker-1") in pairs and ("zk", "broker-3") in pairs
    assert faults.active()["partition"] == [list(pair) for pair in pairs]
    zk.wait_for(lambda: 3 not in zk.partition_state(topic, partition)["isr"], 30,
                f"broker 3 to leave the ISR of {topic}-{partition}")

    faults.heal()
    assert faults.active() == {"partition": [], "toxics": {}}
    zk.wait_for(lambda: 3 in zk.partition_state(topic, partition)["isr"], 60,
                f"broker 3 to rejoin the ISR of {topic}-{partition}")


def test_a_cut_client_link_times_out_while_the_direct_path_answers(shared_proxied_cluster):
    cluster = shared_proxied_cluster
    faults = NetworkFaults(cluster)
    proxy_1 = listen_port(cluster, "client->broker-1")
    direct_1 = cluster.cluster.broker(1).port

    cut = faults.partition({"broker-1": {"client"}, "client": {"broker-1"}})
    assert cut == [("broker-1", "client"), ("client", "broker-1")]
    assert faults.active()["partition"] == [["broker-1", "client"], ["client", "broker-1"]]
    with pytest.raises(TimeoutError):
        api_versions_round_trip(proxy_1, timeout=1.0)
    api_versions_round_trip(direct_1)
    api_versions_round_trip(listen_port(cluster, "client->broker-2"))

    faults.heal()
    api_versions_round_trip(proxy_1)

    # The same cut as a plain toxic, one way: requests go nowhere.
    name = faults.add_toxic("client->broker-1", "timeout", {"timeout": 0}, stream="upstream")
    assert name == "timeout_upstream"
    assert faults.active() == {"partition": [], "toxics": {"client->broker-1": [name]}}
    with pytest.raises(TimeoutError):
        api_versions_round_trip(proxy_1, timeout=1.0)
    faults.remove_toxic("client->broker-1", name)
    api_versions_round_trip(proxy_1)


@pytest.mark.parametrize(("latency_ms", "jitter_ms"), [(100, 10)])
def test_latency_adds_its_delay_to_each_round_trip(shared_proxied_cluster, latency_ms,
                                                  jitter_ms):
    cluster = shared_proxied_cluster
    faults = NetworkFaults(cluster)
    faults.add_toxic("client->broker-1", "latency",
                     {"latency": latency_ms, "jitter": jitter_ms})  # responses
    faults.add_toxic("client->broker-2", "latency",
                     {"latency": latency_ms, "jitter": jitter_ms}, stream="upstream")  # requests
    tolerance = (jitter_ms + 10) / 1000
    for link in ("client->broker-1", "client->broker-2", "client->broker-3"):
        with RawClient(LOOPBACK, listen_port(cluster, link), timeout=5) as client:
            api_versions_round_trip(0, client)  # warm-up: the connection to the broker exists
            median = statistics.median(api_versions_round_trip(0, client) for _ in range(7))
        expected = 0.0 if link == "client->broker-3" else latency_ms / 1000
        assert abs(median - expected) <= tolerance, f"{link}: median round trip {median:.4f}s"


def test_bandwidth_limits_a_large_produce_to_the_rate(shared_proxied_cluster):
    cluster = shared_proxied_cluster
    topic = create_topic(cluster, 1, 1)
    leader = cluster.cluster.wait_for(lambda: cluster.cluster.leader(topic, 0), 30, "a leader")
    link = f"client->broker-{leader}"
    faults = NetworkFaults(cluster)
    rate_kb_s = 400
    batch = build_batch([(None, os.urandom(100_000)) for _ in range(8)])
    body = {"acks": 1, "timeout": 10_000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
    frame_bytes = len(protocol.encode_request(api_key=PRODUCE, api_version=9, correlation_id=1,
                                              client_id="kafka-harness-raw", body=body))
    port = listen_port(cluster, link)

    def timed_produce() -> float:
        with RawClient(LOOPBACK, port, timeout=30) as client:
            api_versions_round_trip(0, client)
            started = time.perf_counter()
            response = client.request(PRODUCE, 9, body)
            elapsed = time.perf_counter() - started
        assert response.responses[0].partition_responses[0].error_code == 0
        return elapsed

    # ZooKeeper names the leader before the leader has acted on its LeaderAndIsr (CI under
    # load: UNKNOWN_TOPIC_OR_PARTITION), so the timing starts once it takes a small produce.
    warm = {"acks": 1, "timeout": 10_000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": build_batch([(None, b"w")])}]}]}

    def takes_produce() -> bool:
        with RawClient(LOOPBACK, port, timeout=30) as client:
            answer = client.request(PRODUCE, 9, warm)
        return answer.responses[0].partition_responses[0].error_code == 0

    cluster.cluster.wait_for(takes_produce, 30, f"broker-{leader} to take produces to {topic}")
    unlimited = timed_produce()
    faults.add_toxic(link, "bandwidth", {"rate": rate_kb_s}, stream="upstream")
    limited = timed_produce()
    expected = frame_bytes / (rate_kb_s * 1000)
    assert unlimited < 0.1 * expected
    assert abs(limited - expected) <= 0.1 * expected, (
        f"{frame_bytes} bytes at {rate_kb_s} KB/s took {limited:.3f}s, expected {expected:.3f}s")


def test_heal_keeps_toxics_and_clear_restores_everything(shared_proxied_cluster):
    cluster = shared_proxied_cluster
    faults = NetworkFaults(cluster)
    assert faults.halves() == [("broker-1", "broker-3"), ("broker-2", "broker-3"),
                               ("broker-3", "broker-1"), ("broker-3", "broker-2")]
    latency = faults.add_toxic("client->broker-1", "latency", {"latency": 300})
    narrow = faults.add_toxic("broker-2->zk", "bandwidth", {"rate": 1}, name="narrow",
                              stream="upstream")
    assert faults.active()["toxics"] == {"client->broker-1": [latency], "broker-2->zk": [narrow]}

    faults.heal()
    assert faults.active() == {"partition": [],
                               "toxics": {"client->broker-1": [latency], "broker-2->zk": [narrow]}}

    ring = faults.ring()
    assert faults.active()["partition"] == [list(pair) for pair in ring]
    # Three brokers: broker-2 is the bridge, hearing and heard by both one-broker sides.
    assert faults.bridge() == [("broker-1", "broker-3"), ("broker-3", "broker-1")]
    faults.isolate("client")
    cluster.proxies["client->broker-3"].disable()
    faults.clear()
    assert faults.active() == {"partition": [], "toxics": {}}
    states = cluster.proxy_states()
    assert all(state["enabled"] and not state["toxics"] for state in states.values())
    for broker_id in (1, 2, 3):
        assert api_versions_round_trip(listen_port(cluster, f"client->broker-{broker_id}")) < 0.1
    zk = cluster.cluster
    zk.wait_for(lambda: zk.registered_broker_ids() == [1, 2, 3], 30, "every broker registered")


def test_bad_input_is_refused_and_changes_nothing(shared_proxied_cluster):
    cluster = shared_proxied_cluster
    faults = NetworkFaults(cluster)
    faults.add_toxic("client->broker-1", "latency", {"latency": 5}, name="kept")
    with pytest.raises(ValueError, match="unknown node 'broker-9'"):
        faults.partition({"broker-9": ["broker-1"]})
    with pytest.raises(ValueError, match="unknown node"):
        faults.isolate("broker-4")
    with pytest.raises(ValueError, match="unknown link 'client->zk'"):
        faults.add_toxic("client->zk", "latency", {"latency": 5})
    with pytest.raises(ValueError, match="stream"):
        faults.add_toxic("client->broker-1", "latency", {"latency": 5}, stream="sideways")
    with pytest.raises(ValueError, match="reserved"):
        faults.add_toxic("client->broker-1", "timeout", {"timeout": 0}, name="partition_upstream")
    with pytest.raises(ValueError, match="refused"):
        faults.add_toxic("client->broker-1", "latency", {"latency": 5}, name="kept")
    # Checked before sending: the real Toxiproxy would take both, the first doing nothing
    # and the second killing the server on the first byte.
    with pytest.raises(ValueError, match="unknown attribute 'latncy'"):
        faults.add_toxic("client->broker-1", "latency", {"latncy": 100})
    with pytest.raises(ValueError, match="average_size"):
        faults.add_toxic("client->broker-1", "slicer", {})
    with pytest.raises(ValueError, match="no toxic 'gone'"):
        faults.remove_toxic("client->broker-1", "gone")
    with pytest.raises(ValueError, match="mechanism"):
        NetworkFaults(cluster, mechanism="carrier-pigeon")
    assert faults.active() == {"partition": [], "toxics": {"client->broker-1": ["kept"]}}
