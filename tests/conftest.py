"""Suite-wide: pytest's own `pytester`, for testing the kafka-harness pytest plugin, and a
broker standing for one a user runs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.cluster.targets import Target, start_target
from harness.plugin.pytest_plugin import SUITE_BROKER_PROPERTIES

pytest_plugins = ["pytester"]


@pytest.fixture(scope="module")
def users_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """ZooKeeper and one reference broker with the suites' settings, started by the test, not
    by the session or command under test: tests point those at it as a user points them at
    their own Kafka."""
    target = start_target("reference", brokers=1, properties=SUITE_BROKER_PROPERTIES,
                          run_dir=tmp_path_factory.mktemp("users-broker"))
    try:
        yield target
    finally:
        target.close()
