"""Target.reset() on the docker backend: a stopped ZooKeeper container and a stopped broker
container run again, a paused ZooKeeper container is unfrozen, and every broker is registered
before the next test starts."""

from __future__ import annotations

import docker
import pytest

from harness.cluster.options import Backend
from harness.cluster.targets import start_target

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]


def test_reset_brings_back_a_stopped_or_paused_zookeeper_and_a_stopped_broker_container(
        engine: docker.DockerClient, project_image: str) -> None:
    target = start_target("reference", brokers=2, backend=Backend.DOCKER)
    try:
        nodes = target.nodes
        assert nodes is not None and nodes.zookeeper is not None
        nodes.stop_broker(2)
        nodes.zookeeper.stop()
        assert not nodes.zookeeper.is_running()
        assert not nodes.broker(2).is_running()
        target.reset()
        assert nodes.zookeeper.is_running()
        assert all(broker.is_running() for broker in nodes.brokers.values())
        assert nodes.registered_broker_ids() == [1, 2]

        nodes.zookeeper.pause()  # the cgroup freezer: the container stays, frozen
        target.reset()
        assert nodes.zookeeper.status() == "running"
        assert nodes.registered_broker_ids() == [1, 2]
    finally:
        target.close()
