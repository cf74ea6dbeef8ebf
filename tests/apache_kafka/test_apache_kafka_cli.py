"""``kafka-harness up --target apache-kafka`` driven from separate shell processes, as a user
would: status shows Kafka's controller, leaders and ISR; every fault command works; ``down``,
Ctrl-C and SIGTERM leave no JVM, proxy, port or namespace behind."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from harness.net.netns_support import unavailable
from harness.supervisor.control import socket_path
from harness.waiting import wait_for
from tests.cli.test_cli_end_to_end import (
    COMMAND_TIMEOUT_S,
    KAFKA_HARNESS,
    Footprint,
    _produce,
    cli,
    ok,
    status,
)


def _wait_for(predicate, what: str, timeout: float = 60.0):
    return wait_for(predicate, timeout, what)


def test_the_cli_drives_an_apache_kafka_cluster(tmp_path):
    run_dir = tmp_path / "run"
    footprint = Footprint()
    try:
        up = ok(run_dir, "up", "--target", "apache-kafka", "--brokers", "3",
                "--session-timeout-ms", "6000")
        state = status(run_dir)
        footprint.record(state)
        assert up.stdout.strip() == state["bootstrap"]
        assert state["target"] == "apache-kafka" and state["version"].startswith("3.9.")
        assert state["phase"] == "ready" and state["degraded"] == []
        assert state["controller"] in (1, 2, 3) and state["controller_epoch"] >= 1
        assert len(state["proxies"]) == 3 + 6 + 3

        _produce(state["bootstrap"], "cli", [b"a", b"b", b"c"])  # auto-created, RF 3
        partition = _wait_for(lambda: (p := status(run_dir)["partitions"].get("cli/0"))
                              and len(p["isr"]) == 3 and p, "cli/0 with 3 in-sync replicas")
        shown = " ".join(ok(run_dir, "status").stdout.split())
        assert "cli/0" in shown and f"apache-kafka {state['version']}" in shown

        leader = partition["leader"]
        ok(run_dir, "partition", "isolate", f"broker-{leader}")
        moved = _wait_for(lambda: (p := status(run_dir)["partitions"]["cli/0"])["leader"]
                          not in (leader, -1) and p, "a new leader in status")
        assert moved["leader_epoch"] > partition["leader_epoch"] and leader not in moved["isr"]
        ok(run_dir, "heal")
        _wait_for(lambda: status(run_dir)["degraded"] == [], "a healthy cluster after heal")

        added = ok(run_dir, "toxic", "add", "broker-1->broker-2", "latency",
                   "--attr", "latency=50")
        name = added.stdout.strip()
        assert status(run_dir)["faults"]["toxics"] == {"broker-1->broker-2": [name]}
        ok(run_dir, "toxic", "remove", "broker-1->broker-2", name)

        ok(run_dir, "pause", "broker-3")
        assert status(run_dir)["nodes"]["broker-3"]["status"] == "paused"
        ok(run_dir, "resume", "broker-3")
        ok(run_dir, "kill", "broker-2")
        assert status(run_dir)["nodes"]["broker-2"]["status"] == "down"
        ok(run_dir, "restart", "broker-2")
        state = status(run_dir)
        footprint.record(state)
        assert state["nodes"]["broker-2"]["registered"] is True

        lost = ok(run_dir, "lose-unflushed", "broker-1", "--json")
        assert '"cli-0"' in lost.stdout
        state = status(run_dir)
        footprint.record(state)
        assert state["nodes"]["broker-1"]["status"] == "running"

        ok(run_dir, "down")
        assert footprint.wait_gone(60) == []
        assert not socket_path(run_dir).exists()
        assert cli(run_dir, "status").returncode == 3
    finally:
        footprint.kill_leftovers()


@pytest.mark.parametrize(("network", "signum"), [
    ("proxy", signal.SIGINT),
    ("proxy", signal.SIGTERM),
    pytest.param("kernel", signal.SIGINT,
                 marks=pytest.mark.skipif(unavailable() is not None, reason=unavailable() or "")),
])
def test_up_foreground_on_apache_kafka_leaves_nothing(tmp_path, network, signum):
    """Ctrl-C (SIGINT) or SIGTERM to ``up --foreground``: every JVM, proxy, port and namespace
    it started is gone, with a fault still in place when the signal comes."""
    run_dir = tmp_path / "run"
    footprint = Footprint()
    with open(tmp_path / "foreground.out", "w") as out:
        process = subprocess.Popen(
            [KAFKA_HARNESS, "up", "--foreground", "--target", "apache-kafka", "--brokers", "2",
             "--network", network, "--dir", str(run_dir)],
            stdout=out, stderr=out, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while not socket_path(run_dir).exists():
            assert process.poll() is None, (tmp_path / "foreground.out").read_text()
            assert time.monotonic() < deadline, "up --foreground never became ready"
            time.sleep(0.1)
        state = _wait_for(lambda: (s := status(run_dir))["phase"] == "ready" and s, "ready")
        footprint.record(state)
        namespaces = list(state.get("namespaces", {}).values())
        if network == "kernel":
            footprint.ports.clear()  # they listen inside the namespaces, which must vanish
            assert len(namespaces) == 3
        assert state["target"] == "apache-kafka"
        ok(run_dir, "partition", "isolate", "broker-1")

        process.send_signal(signum)
        assert process.wait(timeout=COMMAND_TIMEOUT_S) == 0
        assert footprint.wait_gone(60) == []
        if namespaces:
            listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                                    check=True).stdout
            assert [namespace for namespace in namespaces if namespace in listed] == []
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        footprint.kill_leftovers()


def test_the_cli_drives_a_kraft_cluster(tmp_path):
    """``up --target apache-kafka-kraft --brokers 3``: three combined KRaft nodes behind the
    proxies, their Raft traffic on its own channel of each link. ``status`` shows the quorum
    (leader, epoch, each voter's lag) as ZooKeeper mode shows its controller; isolating the
    active controller moves the leadership to a higher epoch; a toxic on a link goes on both of
    its channels; a killed node restarts; ``down`` leaves no JVM, proxy or port behind."""
    run_dir = tmp_path / "run"
    footprint = Footprint()
    try:
        up = ok(run_dir, "up", "--target", "apache-kafka-kraft", "--brokers", "3")
        state = status(run_dir)
        footprint.record(state)
        assert up.stdout.strip() == state["bootstrap"]
        assert state["target"] == "apache-kafka-kraft" and state["version"].startswith("4.")
        assert state["phase"] == "ready" and state["degraded"] == []
        assert len(state["proxies"]) == 3 + 6 + 6  # clients, replication, the quorum's channel
        quorum = state["quorum"]
        assert sorted(quorum["voters"]) == ["1", "2", "3"]
        assert state["controller"] == quorum["leader"] in (1, 2, 3)
        assert state["controller_epoch"] == quorum["epoch"] >= 1
        shown = " ".join(ok(run_dir, "status").stdout.split())
        assert f"quorum: leader broker-{quorum['leader']} (epoch {quorum['epoch']}" in shown

        old = quorum["leader"]
        isolated = ok(run_dir, "partition", "isolate", "controller")  # a role, resolved now
        assert f"isolated broker-{old} (controller)" in " ".join(isolated.stdout.split())
        moved = _wait_for(lambda: (s := status(run_dir)).get("controller") not in (None, old)
                          and s, "another voter to lead")
        assert moved["quorum"]["epoch"] > quorum["epoch"]
        ok(run_dir, "heal")
        _wait_for(lambda: status(run_dir)["degraded"] == [], "a healthy cluster after heal")

        added = ok(run_dir, "toxic", "add", "broker-1->broker-2", "latency",
                   "--attr", "latency=50")
        name = added.stdout.strip()
        assert status(run_dir)["faults"]["toxics"] == {
            "broker-1->broker-2": [name], "broker-1->broker-2:controller": [name]}
        ok(run_dir, "toxic", "remove", "broker-1->broker-2", name)
        assert status(run_dir)["faults"]["toxics"] == {}

        controller = status(run_dir)["controller"]
        killed = ok(run_dir, "kill", "controller")
        assert f"killed broker-{controller} (controller)" in " ".join(killed.stdout.split())
        assert status(run_dir)["nodes"][f"broker-{controller}"]["status"] == "down"
        ok(run_dir, "restart", f"broker-{controller}")
        state = status(run_dir)
        footprint.record(state)
        assert state["nodes"][f"broker-{controller}"]["registered"] is True
        refused = cli(run_dir, "kill", "leader:no-such-topic/0")
        assert refused.returncode == 2 and "no broker is leader:no-such-topic/0" in " ".join(
            refused.stderr.replace("│", " ").split())

        ok(run_dir, "down")
        assert footprint.wait_gone(60) == []
        assert not socket_path(run_dir).exists()
    finally:
        footprint.kill_leftovers()


def test_the_cli_runs_dedicated_controllers(tmp_path):
    """``up --target apache-kafka-kraft --controllers 3``: Kafka's production layout, the
    quorum on controller nodes of their own (ids after the brokers'), each link behind its
    proxy. ``status`` names them, role targets resolve to them, a controller is killed and
    restarted by name, and ``down`` leaves nothing; a target or backend that cannot run
    dedicated controllers is refused before anything starts."""
    refused = cli(tmp_path / "refused", "up", "--target", "apache-kafka", "--controllers", "3")
    assert refused.returncode == 2 and "--controllers runs dedicated KRaft controllers" in " ".join(
        refused.stderr.replace("│", " ").split())
    run_dir = tmp_path / "run"
    footprint = Footprint()
    try:
        ok(run_dir, "up", "--target", "apache-kafka-kraft", "--brokers", "1", "--controllers", "3")
        state = status(run_dir)
        footprint.record(state)
        assert list(state["nodes"]) == ["broker-1", "controller-2", "controller-3",
                                        "controller-4"]
        assert state["spec"]["controllers"] == 3 and state["degraded"] == []
        assert len(state["proxies"]) == 1 + 3 + 6  # client, broker to controllers, the quorum
        quorum = state["quorum"]
        assert sorted(quorum["voters"]) == ["2", "3", "4"] and quorum["observers"] == [1]
        leader = f"controller-{quorum['leader']}"
        shown = " ".join(ok(run_dir, "status").stdout.split())
        assert f"quorum: leader {leader} (epoch {quorum['epoch']}" in shown
        assert f"controller {leader} (epoch" in shown

        isolated = ok(run_dir, "partition", "isolate", "controller")
        assert f"isolated {leader} (controller)" in " ".join(isolated.stdout.split())
        moved = _wait_for(lambda: (s := status(run_dir)).get("controller")
                          not in (None, quorum["leader"]) and s, "another controller to lead")
        assert moved["quorum"]["epoch"] > quorum["epoch"]
        ok(run_dir, "heal")
        _wait_for(lambda: status(run_dir)["degraded"] == [], "a healthy cluster after heal")

        leader = f"controller-{status(run_dir)['controller']}"
        killed = ok(run_dir, "kill", "controller")
        assert f"killed {leader} (controller)" in " ".join(killed.stdout.split())
        assert status(run_dir)["nodes"][leader]["status"] == "down"
        ok(run_dir, "restart", leader)
        state = status(run_dir)
        footprint.record(state)
        assert state["nodes"][leader]["status"] == "running"
        _wait_for(lambda: status(run_dir)["degraded"] == [], "a healthy cluster after restart")

        ok(run_dir, "down")
        assert footprint.wait_gone(60) == []
    finally:
        footprint.kill_leftovers()
