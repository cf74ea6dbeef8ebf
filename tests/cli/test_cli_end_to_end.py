"""The CLI from separate shell processes against one running cluster, and nothing left after.

Every command here is its own process (as a user typing in several terminals would run them);
they share nothing but the run directory, where the supervisor's control socket lives.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness.lifecycle.procfs import process_state
from harness.net.netns_support import unavailable
from harness.net.ports import LOOPBACK, free_port, is_accepting
from harness.supervisor.control import socket_path
from harness.supervisor.files import read_state

KAFKA_HARNESS = str(Path(sys.executable).parent / "kafka-harness")
COMMAND_TIMEOUT_S = 180


def cli(run_dir: Path, *args: str, module: bool = False) -> subprocess.CompletedProcess[str]:
    program = [sys.executable, "-m", "harness.cli"] if module else [KAFKA_HARNESS]
    return subprocess.run([*program, *args, "--dir", str(run_dir)], capture_output=True,
                          text=True, timeout=COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL)


def ok(run_dir: Path, *args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    result = cli(run_dir, *args, **kwargs)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return result


def status(run_dir: Path) -> dict:
    return json.loads(ok(run_dir, "status", "--json").stdout)


class Footprint:
    """Every pid and listening port the run showed, to prove afterwards that none is left."""

    def __init__(self) -> None:
        self.pids: set[int] = set()
        self.ports: set[int] = set()

    def record(self, state: dict) -> None:
        self.pids.add(state["supervisor_pid"])
        if state.get("toxiproxy_pid"):
            self.pids.add(state["toxiproxy_pid"])
            self.ports.add(int(state["toxiproxy_url"].rsplit(":", 1)[1]))
        for facts in state.get("nodes", {}).values():
            if facts["pid"]:
                self.pids.add(facts["pid"])
            self.ports.add(facts["port"])
        self.ports.update(int(p["listen"].rsplit(":", 1)[1]) for p in state.get("proxies", {})
                          .values())

    def alive(self) -> list[str]:
        left = [f"pid {pid}" for pid in sorted(self.pids) if process_state(pid) != "down"]
        return left + [f"port {port}" for port in sorted(self.ports)
                       if is_accepting(LOOPBACK, port)]

    def wait_gone(self, timeout: float = 30) -> list[str]:
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        return self.alive()

    def kill_leftovers(self) -> None:
        """Only when a test failed half-way: stop what this run started, by pid."""
        for pid in self.pids:
            if process_state(pid) != "down":
                os.kill(pid, signal.SIGKILL)


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    """Through the client proxies, replicated to all three brokers, acknowledged by all."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "log.connection.close": False})
    acked: list[bool] = []
    for value in values:
        producer.produce(topic, value=value, on_delivery=lambda err, _m: acked.append(not err))
    producer.flush(30)
    assert acked == [True] * len(values)


def test_commands_without_a_cluster_exit_3(tmp_path):
    for args in (["status"], ["heal"], ["kill", "broker-1"],
                 ["partition", "halves"], ["toxic", "remove", "client->broker-1", "x"]):
        result = cli(tmp_path / "nothing", *args)
        assert result.returncode == 3, (args, result.stderr)
        assert "no cluster running" in result.stderr


def test_usage_errors_before_any_cluster_exit_2(tmp_path):
    assert cli(tmp_path, "partition", "sideways").returncode == 2
    assert cli(tmp_path, "up", "--brokers", "0").returncode == 2
    assert cli(tmp_path, "toxic", "add", "client->broker-1", "latency",
               "--attr", "no-equals-sign").returncode == 2


def test_the_cli_drives_one_cluster_from_separate_processes(tmp_path):
    run_dir = tmp_path / "run"
    footprint = Footprint()
    try:
        up = ok(run_dir, "up", "--brokers", "3", "--session-timeout-ms", "3000")
        state = status(run_dir)
        footprint.record(state)
        assert up.stdout.strip() == state["bootstrap"]
        assert state["phase"] == "ready" and state["degraded"] == []
        assert {node: facts["status"] for node, facts in state["nodes"].items()} == {
            "zk": "running", "broker-1": "running", "broker-2": "running", "broker-3": "running"}
        assert state["controller"] in (1, 2, 3)
        assert len(state["proxies"]) == 3 + 6 + 3
        assert state["toxiproxy_server"].startswith("real v2."), "the real server by default"
        shown = " ".join(ok(run_dir, "status").stdout.split())
        assert f"{state['toxiproxy_server']} server, 12 proxies" in shown
        assert cli(run_dir, "up").returncode == 1  # one cluster per run dir

        ok(run_dir, "partition", "isolate", "broker-2")
        cut = {tuple(pair) for pair in status(run_dir)["faults"]["partition"]}
        assert ("broker-1", "broker-2") in cut and ("broker-2", "zk") in cut
        assert all("broker-2" in pair for pair in cut)
        ok(run_dir, "heal", module=True)
        assert status(run_dir)["faults"] == {"partition": [], "toxics": {}}

        added = ok(run_dir, "toxic", "add", "client->broker-1", "latency",
                   "--attr", "latency=100")
        name = added.stdout.strip()
        assert status(run_dir)["faults"]["toxics"] == {"client->broker-1": [name]}
        # Quoted as a shell reads it back: unquoted, > would redirect.
        assert f"toxics on 'client->broker-1': {name}" in ok(run_dir, "status").stdout
        removed = ok(run_dir, "toxic", "remove", "client->broker-1", name)
        assert removed.stdout.strip() == f"removed {name} from 'client->broker-1'"
        assert status(run_dir)["faults"]["toxics"] == {}

        ok(run_dir, "pause", "broker-3")
        assert status(run_dir)["nodes"]["broker-3"]["status"] == "paused"
        ok(run_dir, "resume", "broker-3")
        assert status(run_dir)["nodes"]["broker-3"]["status"] == "running"

        ok(run_dir, "kill", "broker-2")
        assert status(run_dir)["nodes"]["broker-2"]["status"] == "down"
        ok(run_dir, "restart", "broker-2")
        state = status(run_dir)
        footprint.record(state)
        assert state["nodes"]["broker-2"]["status"] == "running"
        assert state["nodes"]["broker-2"]["registered"] is True

        _produce(state["bootstrap"], "cli", [b"a", b"b", b"c"])
        lost = json.loads(ok(run_dir, "lose-unflushed", "broker-1", "--json").stdout)
        assert lost["node"] == "broker-1"
        # Nothing of the new topic was checkpointed as flushed yet: broker-1 loses its copy.
        assert lost["partitions"]["cli-0"]["log_end_before"] == 3
        assert lost["partitions"]["cli-0"]["log_end_after"] == 0
        state = status(run_dir)
        footprint.record(state)
        assert state["nodes"]["broker-1"]["status"] == "running"
        assert state["nodes"]["broker-1"]["pid"] == lost["pid"]

        # Roles resolve from ZooKeeper's own state when the fault is applied.
        leader = status(run_dir)["partitions"]["cli/0"]["leader"]
        paused = ok(run_dir, "pause", "leader:cli/0")
        assert f"paused broker-{leader} (leader:cli/0)" in " ".join(paused.stdout.split())
        assert status(run_dir)["nodes"][f"broker-{leader}"]["status"] == "paused"
        ok(run_dir, "resume", f"broker-{leader}")
        controller = status(run_dir)["controller"]
        isolated = ok(run_dir, "partition", "isolate", "controller")
        assert f"isolated broker-{controller} (controller)" in " ".join(isolated.stdout.split())
        ok(run_dir, "heal")

        for args in (["kill", "broker-7"], ["pause", "client"], ["lose-unflushed", "zk"],
                     ["kill", "leader:cli/9"], ["kill", "leader:cli"],
                     ["partition", "isolate", "nobody"],
                     ["toxic", "add", "client->broker-9", "latency"],
                     ["toxic", "add", "client->broker-1", "no_such_toxic"]):
            result = cli(run_dir, *args)
            assert result.returncode == 2, (args, result.stderr)
        assert status(run_dir)["degraded"] == []

        ok(run_dir, "down")
        assert footprint.wait_gone() == []
        assert not socket_path(run_dir).exists()
        assert read_state(run_dir)["phase"] == "stopped"
        assert cli(run_dir, "status").returncode == 3
    finally:
        footprint.kill_leftovers()


@pytest.mark.parametrize("network", [
    "proxy",
    pytest.param("kernel", marks=pytest.mark.skipif(unavailable() is not None,
                                                    reason=unavailable() or "")),
])
def test_ctrl_c_on_up_foreground_leaves_nothing(tmp_path, network):
    run_dir = tmp_path / "run"
    footprint = Footprint()
    with open(tmp_path / "foreground.out", "w") as out:
        process = subprocess.Popen([KAFKA_HARNESS, "up", "--foreground", "--brokers", "1",
                                    "--network", network, "--dir", str(run_dir)],
                                   stdout=out, stderr=out, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while not socket_path(run_dir).exists():
            assert process.poll() is None, (tmp_path / "foreground.out").read_text()
            assert time.monotonic() < deadline, "up --foreground never became ready"
            time.sleep(0.1)
        state = status(run_dir)
        footprint.record(state)
        namespaces = list(state.get("namespaces", {}).values())
        if network == "kernel":
            footprint.ports.clear()  # they listen inside the namespaces, which must vanish
            assert len(namespaces) == 2
        assert state["supervisor_pid"] == process.pid
        ok(run_dir, "partition", "isolate", "broker-1")  # a fault in place does not hold it up

        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=COMMAND_TIMEOUT_S) == 0
        assert footprint.wait_gone() == []
        assert not socket_path(run_dir).exists()
        if namespaces:
            listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                                    check=True).stdout
            assert [namespace for namespace in namespaces if namespace in listed] == []
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        footprint.kill_leftovers()


@pytest.mark.parametrize("signum", [signal.SIGTERM])
def test_sigterm_to_the_detached_supervisor_leaves_nothing(tmp_path, signum):
    run_dir = tmp_path / "run"
    footprint = Footprint()
    try:
        ok(run_dir, "up", "--brokers", "1")
        state = status(run_dir)
        footprint.record(state)
        os.kill(state["supervisor_pid"], signum)
        assert footprint.wait_gone(60) == []
        assert cli(run_dir, "status").returncode == 3
    finally:
        footprint.kill_leftovers()


def test_up_exits_3_when_the_infrastructure_cannot_start(tmp_path):
    """A Toxiproxy URL where nothing listens: the proxies cannot be created."""
    run_dir = tmp_path / "run"
    dead = f"http://{LOOPBACK}:{free_port()}"
    result = subprocess.run([KAFKA_HARNESS, "up", "--brokers", "1", "--dir", str(run_dir)],
                            capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
                            env={**os.environ, "TOXIPROXY_URL": dead})
    assert result.returncode == 3, result.stderr
    assert "did not start" in result.stderr
    state = read_state(run_dir)
    assert state["phase"] == "failed" and process_state(state["supervisor_pid"]) == "down"
    assert not socket_path(run_dir).exists()
