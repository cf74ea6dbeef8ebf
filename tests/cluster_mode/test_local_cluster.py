"""LocalCluster: brokers register in ZooKeeper as Kafka's do, survive kills, and leave nothing.

These tests check the cluster's lifecycle and what every broker writes to ZooKeeper, not
replication: that belongs to the suites.
"""

from __future__ import annotations

import base64
import os
import re
import signal
import time
from pathlib import Path

import pytest

from harness.cluster.errors import PeerStartError
from harness.cluster.local import LocalCluster
from harness.cluster.spec import ClusterSpec
from harness.net.ports import is_accepting
from harness.waiting import ClusterWaitTimeout, wait_for

# The fields of a version-5 /brokers/ids/[id] registration, as Kafka writes them.
REGISTRATION_FIELDS = {
    "features", "listener_security_protocol_map", "endpoints", "jmx_port", "port", "host",
    "version", "timestamp",
}
# One cluster for the tests that read it or fault one broker and put it back
# (conftest.shared_cluster): starting ZooKeeper and three brokers costs more than they do.
SHARED_CLUSTER = ClusterSpec(brokers=3)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def process_state(pid: int) -> str:
    """The one-letter state from /proc/[pid]/stat (``T`` when stopped by a signal)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0]


# --- without brokers ---------------------------------------------------------------------------


def test_wait_for_returns_the_value_and_names_what_it_awaited() -> None:
    answers = iter([None, 0, "ready"])
    assert wait_for(lambda: next(answers), 5, "the third answer", interval=0.01) == "ready"

    def broken() -> bool:
        raise ConnectionRefusedError("nothing listening")

    with pytest.raises(ClusterWaitTimeout, match=r"waiting for broker 2 to come back.*"
                                                 r"ConnectionRefusedError: nothing listening"):
        wait_for(broken, 0.2, "broker 2 to come back", interval=0.05)


def test_spec_properties_layer_cluster_then_broker_overrides() -> None:
    spec = ClusterSpec(brokers=2, min_insync_replicas=2, unclean_leader_election_enable=True,
                       properties={"num.partitions": 3, "min.insync.replicas": 1},
                       broker_properties={2: {"num.partitions": 5}})
    one = spec.server_properties(1, "127.0.0.1:2181")
    two = spec.server_properties(2, "127.0.0.1:2181")
    assert one["broker.id"] == 1 and two["broker.id"] == 2
    assert one["zookeeper.connect"] == "127.0.0.1:2181"
    assert one["zookeeper.session.timeout.ms"] == 6000
    assert one["offsets.topic.replication.factor"] == 2
    assert one["default.replication.factor"] == 2
    assert one["unclean.leader.election.enable"] == "true"
    assert one["min.insync.replicas"] == 1  # the cluster-wide property wins over the field
    assert (one["num.partitions"], two["num.partitions"]) == (3, 5)
    five = ClusterSpec(brokers=5).server_properties(1, "zk")
    assert five["offsets.topic.replication.factor"] == five["default.replication.factor"] == 3


def test_spec_rejects_impossible_clusters() -> None:
    with pytest.raises(ValueError, match="brokers must be >= 1"):
        ClusterSpec(brokers=0)
    with pytest.raises(ValueError, match=r"unknown node ids \[4\]"):
        ClusterSpec(brokers=3, broker_properties={4: {"num.partitions": 1}})


def test_a_broker_that_cannot_start_stops_everything(tmp_path: Path) -> None:
    local = LocalCluster(ClusterSpec(brokers=2, broker_properties={2: {"num.partitions": "many"}},
                                     startup_timeout=30), run_dir=tmp_path)
    with pytest.raises(PeerStartError, match="num.partitions"):
        local.start()
    assert local.zookeeper is None
    assert not local.running_broker_ids()
    assert (tmp_path / "zookeeper" / "zookeeper.log").exists()


# --- with a running cluster --------------------------------------------------------------------


def test_every_broker_registers_with_kafkas_fields(shared_cluster: LocalCluster) -> None:
    local = shared_cluster
    assert local.registered_broker_ids() == [1, 2, 3]
    for broker_id, broker in local.brokers.items():
        registration = local.broker_registration(broker_id)
        assert registration is not None
        assert set(registration) >= REGISTRATION_FIELDS
        assert registration["version"] == 5
        assert registration["host"] == broker.host and registration["port"] == broker.port
        assert registration["endpoints"] == [f"PLAINTEXT://{broker.host}:{broker.port}"]
        assert registration["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
        assert re.fullmatch(r"\d+", registration["timestamp"])
        assert local.broker_metadata(broker_id) == {1, 2, 3}
    assert local.bootstrap == ",".join(b.bootstrap for b in local.brokers.values())


def test_cluster_id_controller_and_epoch_exist(shared_cluster: LocalCluster) -> None:
    local = shared_cluster
    cluster_id = local.cluster_id()
    assert cluster_id is not None and re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id)
    assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16
    controller = local.wait_for(local.controller_id, 30, "a controller")
    assert controller in local.brokers
    epoch = local.controller_epoch()
    assert epoch is not None and epoch >= 1
    with local.zk() as zk:
        assert zk.exists("/controller") is not None
        assert zk.exists("/controller_epoch") is not None
        assert zk.get("/cluster/id")[0].startswith(b"{")


def test_a_killed_broker_reregisters_after_a_restart(shared_cluster: LocalCluster) -> None:
    local = shared_cluster
    controller = local.wait_for(local.controller_id, 30, "a controller")
    victim = next(b for b in local.brokers if b != controller)
    with local.zk() as zk:
        old_czxid = zk.exists(f"/brokers/ids/{victim}").czxid
    port = local.brokers[victim].port
    pid = local.brokers[victim].pid
    assert local.kill(victim) == -signal.SIGKILL
    assert pid is not None and gone(pid)
    local.wait_for(lambda: victim not in local.registered_broker_ids(),
                   local.spec.zookeeper_session_timeout_ms / 1000 + 10,
                   f"broker {victim}'s session to expire")
    local.start_broker(victim)
    assert local.brokers[victim].port == port
    with local.zk() as zk:
        assert zk.exists(f"/brokers/ids/{victim}").czxid > old_czxid
    assert local.registered_broker_ids() == [1, 2, 3]
    local.wait_for(lambda: local.broker_metadata(controller) == {1, 2, 3}, 30,
                   f"the controller's Metadata to list broker {victim} again")


def test_a_stopped_broker_deregisters_at_once_and_restarts(shared_cluster: LocalCluster) -> None:
    local = shared_cluster
    assert local.stop_broker(2) == 0
    # A graceful stop closes the ZooKeeper session: no waiting for it to expire.
    local.wait_for(lambda: local.registered_broker_ids() == [1, 3], 5, "broker 2 to deregister")
    local.start_broker(2, wait_for_deregistration=False)
    assert local.registered_broker_ids() == [1, 2, 3]


def test_pause_and_resume_send_sigstop_and_sigcont(shared_cluster: LocalCluster) -> None:
    """A paused broker is resumed; that stop() still ends a paused broker cleanly is
    test_stop_leaves_no_process_and_no_listening_port's (the shared cluster goes on)."""
    local = shared_cluster
    pid = local.brokers[1].pid
    assert pid is not None
    local.pause(1)
    local.wait_for(lambda: process_state(pid) == "T", 5, "the broker to be stopped")
    assert local.paused == {1}
    local.resume(1)
    local.wait_for(lambda: process_state(pid) != "T", 5, "the broker to run again")
    assert local.broker_metadata(1) == {1, 2, 3}


def test_stop_leaves_no_process_and_no_listening_port(tmp_path: Path) -> None:
    local = LocalCluster(ClusterSpec(brokers=3), run_dir=tmp_path)
    with local:
        assert local.zookeeper is not None
        zookeeper = local.zookeeper
        pids = [b.pid for b in local.brokers.values()] + [zookeeper.pid]
        addresses = [(b.host, b.port) for b in local.brokers.values()]
        addresses.append((zookeeper.host, zookeeper.port))
        local.pause(3)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(is_accepting(h, p) for h, p in addresses):
        time.sleep(0.1)
    assert all(pid is not None and gone(pid) for pid in pids)
    assert not any(is_accepting(host, port) for host, port in addresses)
    assert [b.returncode for b in local.brokers.values()] == [0, 0, 0]
    local.stop()  # a second stop is harmless
    assert all(path.exists() for path in local.log_paths())
