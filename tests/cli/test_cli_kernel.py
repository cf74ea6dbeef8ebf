"""`kafka-harness up --network kernel`: the nodes in network namespaces, partitions as iptables
drops, the same commands from separate processes — and after `down` no namespace, rule, bridge
or process left."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from harness.net.netns_support import unavailable

from .test_cli_end_to_end import KAFKA_HARNESS, Footprint, cli, ok, status

REASON = unavailable()
kernel_only = pytest.mark.skipif(REASON is not None, reason=REASON or "")
TOPIC = "kernel-cli"


def _netns_list() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                          check=True).stdout


def _isr(zookeeper: str) -> list[int]:
    client = KazooClient(hosts=zookeeper, timeout=5)
    client.start(timeout=10)
    try:
        data, _ = client.get(f"/brokers/topics/{TOPIC}/partitions/0/state")
    finally:
        client.stop()
        client.close()
    return json.loads(data)["isr"]


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


@kernel_only
def test_kernel_partition_drops_a_broker_from_the_isr_heal_returns_it_down_leaves_nothing(
        tmp_path: Path):
    run_dir = tmp_path / "run"
    footprint = Footprint()
    namespaces: list[str] = []
    try:
        ok(run_dir, "up", "--network", "kernel", "--brokers", "3", "--session-timeout-ms",
           "3000")
        state = status(run_dir)
        footprint.record(state)
        footprint.ports.clear()  # they listen inside the namespaces, which must vanish
        assert state["network"] == "kernel" and state["proxies"] == {}
        namespaces = [*state["namespaces"].values(), state["hub"]]
        assert sorted(state["namespaces"]) == ["broker-1", "broker-2", "broker-3", "zk"]
        assert all(namespace in _netns_list() for namespace in namespaces)
        assert "network: kernel" in ok(run_dir, "status").stdout
        zookeeper = f"{state['addresses']['zk']}:{state['nodes']['zk']['port']}"

        admin = AdminClient({"bootstrap.servers": state["bootstrap"]})
        admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[1, 2, 3]])])[
            TOPIC].result(30)
        producer = Producer({"bootstrap.servers": state["bootstrap"], "acks": "all"})
        producer.produce(TOPIC, b"before")
        assert producer.flush(30) == 0
        assert sorted(_isr(zookeeper)) == [1, 2, 3]

        ok(run_dir, "partition", "isolate", "broker-2")
        cut = {tuple(pair) for pair in status(run_dir)["faults"]["partition"]}
        assert {("broker-1", "broker-2"), ("broker-2", "zk"), ("client", "broker-2")} <= cut
        _wait(lambda: 2 not in _isr(zookeeper), 60, "broker-2 to leave the ISR")
        refused = cli(run_dir, "toxic", "add", "client->broker-1", "latency",
                      "--attr", "latency=100")
        assert refused.returncode == 2
        assert "--network proxy" in " ".join(refused.stderr.split())

        ok(run_dir, "heal")
        assert status(run_dir)["faults"] == {"partition": [], "toxics": {}}
        _wait(lambda: sorted(_isr(zookeeper)) == [1, 2, 3], 90, "broker-2 to rejoin the ISR")
        producer.produce(TOPIC, b"after")
        assert producer.flush(30) == 0
        del producer

        ok(run_dir, "down")
        assert footprint.wait_gone() == []
        listed = _netns_list()
        assert not [namespace for namespace in namespaces if namespace in listed]
        links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                               check=True).stdout
        assert state["host_link"] not in links
        host_rules = subprocess.run(["iptables", "-w", "-S"], capture_output=True, text=True,
                                    check=True).stdout
        assert "HARNESS-GRUDGE" not in host_rules and state["subnet"] not in host_rules
    finally:
        footprint.kill_leftovers()
        for namespace in namespaces:
            if namespace in _netns_list():
                subprocess.run(["ip", "netns", "del", namespace], check=False)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root to drop to an unprivileged user with setpriv")
def test_up_network_kernel_without_root_exits_3_naming_what_is_missing(tmp_path: Path):
    tmp_path.chmod(0o777)
    result = subprocess.run(
        ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
         KAFKA_HARNESS, "up", "--network", "kernel", "--dir", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)})
    assert result.returncode == 3, result.stderr
    assert "needs root" in " ".join(result.stderr.split())
    assert not (tmp_path / "run").exists()


def test_network_kernel_is_only_for_targets_the_harness_runs(tmp_path: Path):
    result = cli(tmp_path / "run", "up", "--network", "kernel", "--target", "tansu")
    assert result.returncode == 2
    shown = " ".join(result.stderr.replace("│", " ").split())  # typer boxes the message
    assert "--network kernel is for the targets the harness runs as a cluster" in shown
    assert "not 'tansu'" in shown and "TargetName" not in shown


def test_a_kraft_cluster_is_refused_what_it_cannot_run_with_the_reason(tmp_path: Path):
    """KRaft nodes run behind the proxies (local backend) or in containers (docker backend):
    the kernel network and disks on the docker backend are refused (exit 2) before anything
    starts, never silently narrowed."""
    kernel = cli(tmp_path / "run", "up", "--target", "apache-kafka-kraft", "--network", "kernel")
    assert kernel.returncode == 2
    shown = " ".join(kernel.stderr.replace("│", " ").split())
    assert "not 'apache-kafka-kraft'" in shown and "(--network proxy)" in shown
    disk = cli(tmp_path / "run", "up", "--target", "apache-kafka-kraft", "--disk", "limited",
               "--backend", "docker")
    assert disk.returncode == 2
    assert "--disk needs a cluster the harness runs on the local backend" in " ".join(
        disk.stderr.replace("│", " ").split())
    assert not (tmp_path / "run" / "state.json").exists()
