"""Kernel-level partitions on a whole cluster: ZooKeeper and three brokers, each in its own
network namespace, cut with iptables DROP rules (the mechanism Jepsen and Trogdor use)."""

from __future__ import annotations

import subprocess

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.local import ClusterSpec
from harness.cluster.netns_cluster import KernelFaults, NetnsCluster
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
        with pytest.raises(ValueError, match="proxies mechanism"):
            faults.isolate("client")
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                            check=True).stdout
    assert not any(ns in listed for ns in namespaces), "namespaces left behind"
