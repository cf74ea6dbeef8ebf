"""Kernel-level partitions on a whole cluster: ZooKeeper and three brokers, each in its own
network namespace, cut with iptables DROP rules (the mechanism Jepsen and Trogdor use)."""

from __future__ import annotations

import subprocess
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.netns_cluster import KernelFaults, NetnsCluster
from harness.cluster.spec import ClusterSpec
from harness.raw_client import RawClient
from tests.nemesis.conftest import api_versions_round_trip
from tests.nemesis.test_kernel_partitions import _REASON

pytestmark = pytest.mark.skipif(_REASON is not None, reason=_REASON or "")


def test_isolating_a_broker_by_iptables_drops_it_from_the_isr_and_heal_brings_it_back(
        tmp_path):
    spec = ClusterSpec(brokers=3, zookeeper_session_timeout_ms=4000,
                       properties={"replica.lag.time.max.ms": 1500})
    cluster = NetnsCluster(spec, run_dir=tmp_path / "run")
    namespaces: list[str] = []
    with cluster:
        assert cluster.net is not None
        namespaces = [cluster.net.namespace(node) for node in cluster.nodes]
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("kernel", 1, replica_assignment=[[1, 2, 3]])])[
            "kernel"].result(30)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        producer.produce("kernel", b"before")
        assert producer.flush(30) == 0

        faults = KernelFaults(cluster)
        cut = faults.isolate("broker-3")
        assert ("broker-1", "broker-3") in cut and ("broker-3", "zk") in cut
        cluster.wait_for(lambda: 3 not in cluster.partition_state("kernel", 0)["isr"], 30,
                         "broker 3 to leave the ISR once its packets are dropped")
        producer.produce("kernel", b"during")
        assert producer.flush(30) == 0  # the remaining ISR still takes acks=all writes
        faults.heal()
        assert faults.active()["partition"] == []
        cluster.wait_for(lambda: 3 in cluster.partition_state("kernel", 0)["isr"], 60,
                         "broker 3 to rejoin the ISR after heal")
        with pytest.raises(ValueError, match="--network proxy"):
            faults.add_toxic("client->broker-1", "latency", {"latency": 100})
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                            check=True).stdout
    assert not any(ns in listed for ns in namespaces), "namespaces left behind"


def test_a_client_side_kernel_partition_makes_the_client_time_out_until_heal(tmp_path):
    """The client is the host: its packets are dropped inside the broker's namespace (from and
    to the bridge's address), and the host's own firewall is left alone."""
    cluster = NetnsCluster(ClusterSpec(brokers=1), run_dir=tmp_path / "run")
    with cluster:
        assert cluster.net is not None
        broker = cluster.broker(1)
        host_rules = subprocess.run(["iptables", "-w", "-S"], capture_output=True, text=True,
                                    check=True).stdout
        faults = KernelFaults(cluster)
        with RawClient(broker.host, broker.port, timeout=2.0) as client:
            api_versions_round_trip(broker.port, client)
            cut = faults.isolate("client")
            assert cut == [("broker-1", "client"), ("client", "broker-1")]
            assert cluster.net.rules("broker-1") == [
                f"-A HARNESS-GRUDGE -s {cluster.net.gateway}/32 -j DROP",
                f"-A HARNESS-GRUDGE-OUT -d {cluster.net.gateway}/32 -j DROP"]
            assert cluster.net.rules("zk") == []
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                api_versions_round_trip(broker.port, client)  # an open connection stalls
            assert 1.5 < time.monotonic() - started < 10
        with pytest.raises(TimeoutError):
            RawClient(broker.host, broker.port, timeout=2.0)  # and no new one opens
        assert cluster.registered_broker_ids() == [1]  # ZooKeeper still hears the broker
        assert subprocess.run(["iptables", "-w", "-S"], capture_output=True, text=True,
                              check=True).stdout == host_rules
        faults.heal()
        with RawClient(broker.host, broker.port, timeout=5.0) as client:
            api_versions_round_trip(broker.port, client)
