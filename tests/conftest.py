"""Suite-wide: pytest's own `pytester`, for testing the kafka-harness pytest plugin, the files'
order on pytest-xdist workers (`tests/scheduling.py`), each test's reports kept for its
fixtures, a broker standing for one a user runs, and the environment of the processes tests
start (Apache Kafka's JVMs set up for a short life, Hypothesis's one directory)."""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from harness.cluster.apache_kafka import JVM_OPTS_ENV, SHORT_LIVED_JVM_OPTS
from harness.cluster.targets import Target, start_target
from harness.plugin.pytest_plugin import SUITE_BROKER_PROPERTIES
from tests.shared_clusters import REPORTS

pytest_plugins = ["pytester", "tests.scheduling"]

# Every Apache Kafka broker and controller a test starts, in this process or in a command it
# runs, lives for seconds: it starts on the JIT's first tier (harness.cluster.apache_kafka).
# A value already set wins, as for any user of the harness.
os.environ.setdefault(JVM_OPTS_ENV, SHORT_LIVED_JVM_OPTS)
# And every process a test starts that imports kio (a CLI command run in a temporary
# directory, a standalone tool) shares this checkout's Hypothesis directory, where kio's
# strategies find Hypothesis's Unicode table built: in a fresh directory building it costs
# 1.2 s of CPU (reference_broker/__main__.py).
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY",
                      str(Path(__file__).resolve().parent.parent / ".hypothesis"))


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
