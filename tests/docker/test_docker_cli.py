"""The CLI on the docker backend, each command its own process as a user would type them:
up, a partition cut by iptables that drops a broker from the ISR, heal, down — and nothing
with the run's label left on the engine afterwards, even when the supervisor was killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import docker
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.docker.backend import remove_run
from harness.lifecycle.procfs import process_state
from harness.waiting import wait_for

from ..processes import watchdog_of

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

KAFKA_HARNESS = str(Path(sys.executable).parent / "kafka-harness")
QUIET = {"log_level": 0}


def cli(run_dir: Path, *args: str,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KAFKA_HARNESS, *args, "--dir", str(run_dir)], capture_output=True,
                          text=True, timeout=900, stdin=subprocess.DEVNULL, env=env)


def ok(run_dir: Path, *args: str,
       env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    result = cli(run_dir, *args, env=env)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return result


def status(run_dir: Path, env: dict[str, str] | None = None) -> dict:
    return json.loads(ok(run_dir, "status", "--json", env=env).stdout)


def labelled(engine: docker.DockerClient, selector: str) -> list[str]:
    filters = {"label": selector}
    return ([c.name for c in engine.containers.list(all=True, filters=filters)]
            + [n.name for n in engine.networks.list(filters=filters)]
            + [v.name for v in engine.volumes.list(filters=filters)])


def isr(zookeeper_connect: str, topic: str) -> list[int]:
    """The ISR of ``topic``-0 as ZooKeeper holds it (through the observer link status names,
    which no partition cuts)."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zookeeper_connect)
    client.start(timeout=10)
    try:
        data, _ = client.get(f"/brokers/topics/{topic}/partitions/0/state")
    finally:
        client.stop()
        client.close()
    return sorted(json.loads(data)["isr"])


def test_up_partition_heal_down_on_docker(tmp_path: Path):
    engine = docker.from_env()
    run_dir = tmp_path / "run"
    up = cli(run_dir, "up", "--backend", "docker", "--session-timeout-ms", "4000")
    if up.returncode == 3 and "engine" in up.stderr:
        pytest.skip(f"no docker engine could be started: {up.stderr[-300:]}")
    assert up.returncode == 0, (up.stdout, up.stderr)
    selector = ""
    try:
        state = status(run_dir)
        selector = state["run_label"]
        assert state["backend"] == "docker" and state["degraded"] == []
        assert {facts["status"] for facts in state["nodes"].values()} == {"running"}
        assert all(facts["container"] for facts in state["nodes"].values())
        assert len(labelled(engine, selector)) == 5 + 1 + 3  # containers, network, volumes
        bootstrap = up.stdout.strip().splitlines()[-1]
        assert bootstrap == state["bootstrap"]

        topic = f"cli-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
        admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
        zookeeper = state["zookeeper_connect"]
        wait_for(lambda: isr(zookeeper, topic) == [1, 2, 3], 30, f"a full ISR of {topic}")

        ok(run_dir, "partition", "isolate", "broker-2")
        cut = status(run_dir)["faults"]["partition"]
        assert ["broker-2", "zk"] in cut and ["client", "broker-2"] in cut
        wait_for(lambda: 2 not in isr(zookeeper, topic), 60, "broker 2 to leave the ISR")

        ok(run_dir, "heal")
        assert status(run_dir)["faults"] == {"partition": [], "toxics": {}}
        wait_for(lambda: isr(zookeeper, topic) == [1, 2, 3], 90, "broker 2 to rejoin the ISR")
    finally:
        down = cli(run_dir, "down")
    assert down.returncode == 0, (down.stdout, down.stderr)
    assert labelled(engine, selector) == []
    assert json.loads((run_dir / "state.json").read_text())["phase"] == "stopped"


def _watchdog_of(pid: int) -> int:
    found = watchdog_of(pid)
    assert found is not None, f"no watchdog of {pid}"
    return found


def test_a_killed_supervisors_watchdog_removes_the_run(tmp_path: Path,
                                                       engine: docker.DockerClient):
    """SIGKILL runs no clean-up in the supervisor, but its watchdog removes every container,
    network and volume of the run."""
    run_dir = tmp_path / "run"
    ok(run_dir, "up", "--backend", "docker", "--brokers", "1")
    state = status(run_dir)
    selector = state["run_label"]
    try:
        assert labelled(engine, selector)
        os.kill(state["supervisor_pid"], signal.SIGKILL)
        wait_for(lambda: labelled(engine, selector) == [], 60,
                 "the watchdog to remove the killed supervisor's containers")
    finally:
        remove_run(engine, selector.partition("=")[2])


def test_down_after_the_supervisor_and_its_watchdog_were_killed_still_removes_the_run(
        tmp_path: Path, engine: docker.DockerClient):
    """With the watchdog gone too, ``down`` finds the run's label in state.json and removes
    what it names."""
    run_dir = tmp_path / "run"
    ok(run_dir, "up", "--backend", "docker", "--brokers", "1")
    state = status(run_dir)
    selector = state["run_label"]
    try:
        os.kill(_watchdog_of(state["supervisor_pid"]), signal.SIGKILL)
        os.kill(state["supervisor_pid"], signal.SIGKILL)
        wait_for(lambda: process_state(state["supervisor_pid"]) == "down", 10,
                 "the supervisor to die")
        assert labelled(engine, selector)
        down = ok(run_dir, "down")
        assert "was gone" in down.stderr
    finally:
        remove_run(engine, selector.partition("=")[2])
    assert labelled(engine, selector) == []


def _kill_supervisor_and_watchdog(pid: int) -> None:
    os.kill(_watchdog_of(pid), signal.SIGKILL)
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: process_state(pid) == "down", 10, "the supervisor to die")


def test_the_next_docker_run_and_down_all_remove_the_containers_of_killed_runs(
        tmp_path: Path, engine: docker.DockerClient):
    """Runs whose supervisor and watchdog were both SIGKILLed leave their containers behind:
    the next docker cluster to start removes those of a dead owner, and ``down --all``
    (whatever ``--dir``) those of a run killed after that. A TMPDIR of the test's own keeps
    ``down --all`` away from other supervisors of this user on the machine."""
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(private_tmp)}
    selectors: list[str] = []
    try:
        for name in ("first", "second"):
            run_dir = tmp_path / name
            ok(run_dir, "up", "--backend", "docker", "--brokers", "1", env=env)
            state = status(run_dir, env)
            selectors.append(state["run_label"])
            if name == "second":  # its start reaped the first, dead run
                assert labelled(engine, selectors[0]) == []
            _kill_supervisor_and_watchdog(state["supervisor_pid"])
            assert labelled(engine, selectors[-1])
        down = ok(tmp_path / "unrelated", "down", "--all", env=env)
        assert labelled(engine, selectors[1]) == []
        assert "labelled as the harness's" in down.stderr
    finally:
        for selector in selectors:
            remove_run(engine, selector.partition("=")[2])
