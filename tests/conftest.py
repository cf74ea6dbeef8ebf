"""Suite-wide: pytest's own `pytester`, for testing the kafka-harness pytest plugin, the files'
order on pytest-xdist workers (`tests/scheduling.py`), each test's reports kept for its
fixtures, and a broker standing for one a user runs."""

from __future__ import annotations

from collections.abc import Generator, Iterator

import pytest

from harness.cluster.targets import Target, start_target
from harness.plugin.pytest_plugin import SUITE_BROKER_PROPERTIES
from tests.shared_clusters import REPORTS

pytest_plugins = ["pytester", "tests.scheduling"]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep each phase's report on the test, so a fixture's teardown knows whether the test
    failed (:func:`tests.shared_clusters.failed`) and can print its cluster's logs."""
    report = yield
    item.stash.setdefault(REPORTS, {})[report.when] = report
    return report


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
