"""Target.reset() between tests brings back everything a test stopped, ZooKeeper included."""

from __future__ import annotations

from harness.cluster.targets import start_target


def test_reset_starts_a_stopped_zookeeper_and_broker_and_waits_for_registration() -> None:
    target = start_target("reference", brokers=2)
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
