"""Fixtures for tests that run a whole local cluster: ZooKeeper plus reference brokers.

``cluster(...)`` starts a :class:`LocalCluster` under the test's ``tmp_path`` and stops it when
the test ends, whatever happened. The run directory is pytest's, so the logs outlive the test;
when a test fails its log paths are printed with the failure.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest

from harness.cluster.local import LocalCluster
from harness.cluster.spec import ClusterSpec

_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    item.stash.setdefault(_REPORTS, {})[report.when] = report
    return report


def _failed(node: pytest.Item) -> bool:
    return any(report.failed for report in node.stash.get(_REPORTS, {}).values())


@pytest.fixture
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., LocalCluster]]:
    """A factory: ``cluster(brokers=3, **ClusterSpec fields)`` → a started LocalCluster."""
    started: list[LocalCluster] = []

    def make(**spec: Any) -> LocalCluster:
        run_dir = tmp_path_factory.mktemp(f"cluster-{len(started)}")
        local = LocalCluster(ClusterSpec(**spec), run_dir=run_dir)
        started.append(local)
        local.start()
        return local

    yield make
    for local in reversed(started):
        local.stop()
    if _failed(request.node):
        for local in started:
            paths = "\n  ".join(str(path) for path in local.log_paths())
            print(f"cluster logs:\n  {paths}")
