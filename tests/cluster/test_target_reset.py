"""Target.reset() between tests brings back everything a test stopped or paused, ZooKeeper
included, on the local backend with either network mechanism (the docker backend's case is in
tests/docker/test_docker_reset.py)."""

from __future__ import annotations

from enum import StrEnum

import pytest

from harness.cluster.options import Network
from harness.cluster.targets import start_target
from harness.net.netns_support import unavailable
from harness.waiting import wait_for

KERNEL_SKIP = pytest.mark.skipif(unavailable() is not None,
                                 reason=f"kernel network: {unavailable()}")


class ZooKeeperFault(StrEnum):
    STOP = "stop"    # SIGTERM: the process is gone
    PAUSE = "pause"  # SIGSTOP: it runs no code, its sockets stay open


@pytest.mark.parametrize(("network", "fault"), [
    (Network.PROXY, ZooKeeperFault.STOP),
    # Slow: about 15-60 s each on the shared 2-core machine (CI has no time to spare).
    pytest.param(Network.PROXY, ZooKeeperFault.PAUSE, marks=pytest.mark.slow),
    # Every node in a network namespace: ZooKeeper restarts inside its own, on its address.
    pytest.param(Network.KERNEL, ZooKeeperFault.STOP, marks=[pytest.mark.slow, KERNEL_SKIP]),
])
def test_reset_brings_back_zookeeper_and_a_stopped_broker_and_waits_for_registration(
        network: Network, fault: ZooKeeperFault) -> None:
    target = start_target("reference", brokers=2, network=network)
    try:
        nodes = target.nodes
        assert nodes is not None and nodes.zookeeper is not None
        nodes.stop_broker(2)
        if fault is ZooKeeperFault.STOP:
            nodes.zookeeper.stop()
            assert not nodes.zookeeper.is_running()
        else:
            nodes.zookeeper.pause()
            zookeeper = nodes.zookeeper  # SIGSTOP lands a moment after kill() returns
            wait_for(lambda: _process_state(zookeeper.pid) == "paused", 10, "ZooKeeper to stop")
        target.reset()
        assert nodes.zookeeper.is_running()
        assert _process_state(nodes.zookeeper.pid) == "running"
        assert all(broker.is_running() for broker in nodes.brokers.values())
        assert nodes.registered_broker_ids() == [1, 2]
    finally:
        target.close()


def _process_state(pid: int | None) -> str:
    from harness.lifecycle.procfs import process_state

    return process_state(pid)
