"""A real ZooKeeper (the fixtures of tests/zk) and a cluster of fake brokers for the controller.

The controller under test is real; the brokers it talks to are tiny asyncio servers that speak
the Kafka protocol, record every LeaderAndIsr / UpdateMetadata / StopReplica they get and
answer success — enough to see exactly what the controller decided and sent.
"""

from __future__ import annotations

from tests.zk.conftest import zk_client, zk_connect, zookeeper

__all__ = ["zk_client", "zk_connect", "zookeeper"]
