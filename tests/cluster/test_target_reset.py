"""Target.reset() between tests brings back everything a test stopped, ZooKeeper included, on
the local backend with either network mechanism (the docker backend's case is in
tests/docker/test_docker_reset.py)."""

from __future__ import annotations

import pytest

from harness.cluster.targets import Network, start_target
from harness.net.netns import unavailable


@pytest.mark.parametrize("network", [
    Network.PROXY,
    # Every node in a network namespace: ZooKeeper restarts inside its own, on its address.
    # Slow: 48 s on the shared 2-core machine at load 19 (CI has no time to spare).
    pytest.param(Network.KERNEL, marks=[pytest.mark.slow, pytest.mark.skipif(
        unavailable() is not None, reason=f"kernel network: {unavailable()}")]),
])
def test_reset_starts_a_stopped_zookeeper_and_broker_and_waits_for_registration(
        network: Network) -> None:
    target = start_target("reference", brokers=2, network=network)
    try:
        nodes = target.nodes
        assert nodes is not None and nodes.zookeeper is not None
        nodes.stop_broker(2)
        nodes.zookeeper.stop()
        assert not nodes.zookeeper.is_running()
        target.reset()
        assert nodes.zookeeper.is_running()
        assert all(broker.is_running() for broker in nodes.brokers.values())
        assert nodes.registered_broker_ids() == [1, 2]
    finally:
        target.close()
