"""Target.reset() between tests brings back everything a test stopped or paused, ZooKeeper
included, on the local backend with either network mechanism (the docker backend's case is in
tests/docker/test_docker_reset.py), and returns only once every broker knows every other."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any, cast

import pytest

from harness.cluster.nodes import ClusterNodes, wait_until_whole
from harness.cluster.options import Network
from harness.cluster.targets import start_target
from harness.net.netns_support import unavailable
from harness.waiting import ClusterWaitTimeout, wait_for

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
        assert all(nodes.lists_brokers(b, {1, 2}) for b in (1, 2))
    finally:
        target.close()


class _LateMetadata:
    """Brokers 1 and 2, both registered, whose Metadata lists broker 2 only from the
    `late`-th question on: a controller's UpdateMetadata arriving after the registration."""

    def __init__(self, late: int) -> None:
        self.brokers = {1: None, 2: None}
        self.asked: list[int] = []
        self._late = late

    def registered_broker_ids(self) -> list[int]:
        return [1, 2]

    def lists_brokers(self, broker_id: int, expected: set[int]) -> bool:
        self.asked.append(broker_id)
        return len(self.asked) >= self._late or expected <= {1}

    def wait_for(self, predicate: Callable[[], Any], timeout: float, what: str, *,
                 interval: float = 0.0) -> Any:
        return wait_for(predicate, timeout, what, interval=0.001)


def test_whole_waits_for_every_brokers_metadata_after_the_registrations() -> None:
    nodes = _LateMetadata(late=3)
    wait_until_whole(cast(ClusterNodes, nodes), 5, "after the test")
    assert nodes.asked == [1, 1, 1, 2]


def test_whole_names_the_broker_whose_metadata_never_lists_them_all() -> None:
    with pytest.raises(ClusterWaitTimeout, match=r"broker 1's Metadata to list brokers \[1, 2\]"):
        wait_until_whole(cast(ClusterNodes, _LateMetadata(late=10**9)), 0.05, "after the test")


def _process_state(pid: int | None) -> str:
    from harness.lifecycle.procfs import process_state

    return process_state(pid)
