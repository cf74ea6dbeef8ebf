"""One real ZooKeeper for the whole session; each test works under its own chroot.

A unique chroot per test (``/t-<hex>``) gives every test an empty tree without deleting
anything, so tests cannot see each other's znodes even if one fails half-way.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from harness.cluster.zookeeper import ZooKeeperServer
from reference_broker.zk.kafka_zk_client import KafkaZkClient

SESSION_TIMEOUT_MS = 4_000


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperServer) -> str:
    return f"{zookeeper.connect_string}/t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def zk_client(zk_connect: str) -> Iterator[Callable[[], KafkaZkClient]]:
    """A factory of started clients on this test's chroot, all closed at the end."""
    clients: list[KafkaZkClient] = []

    def make() -> KafkaZkClient:
        client = KafkaZkClient(zk_connect, session_timeout_ms=SESSION_TIMEOUT_MS).start()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()
