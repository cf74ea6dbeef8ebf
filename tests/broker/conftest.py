import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.peers import ReferenceBroker


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    """One reference broker process shared by the tests that do not restart it."""
    with ReferenceBroker(tmp_path_factory.mktemp("shared-broker")) as running:
        yield running
    assert running.returncode == 0, "SIGTERM must shut the broker down cleanly (exit 0)"


@pytest.fixture
def fresh_broker(tmp_path):
    """A broker of the test's own, for tests that kill or restart it."""
    running = ReferenceBroker(tmp_path / "broker")
    running.start()
    yield running
    running.stop()


@pytest.fixture
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create_topic(bootstrap: str, partitions: int = 1, config: dict | None = None) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name]
    future.result(timeout=10)
    return name


@pytest.fixture
def topic(broker):
    return create_topic(broker.bootstrap)


GROUP_PROPERTIES = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 100,
                    "group.max.size": 3, "offset.metadata.max.bytes": 64}


@pytest.fixture(scope="session")
def group_broker(tmp_path_factory):
    """A broker tuned for group tests: no initial rebalance delay, short sessions allowed."""
    with ReferenceBroker(tmp_path_factory.mktemp("group-broker"),
                         properties=GROUP_PROPERTIES) as running:
        yield running
    assert running.returncode == 0
