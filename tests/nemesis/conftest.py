"""Fixtures for the fault tests: real 3-broker clusters with every link behind a proxy.

``proxied_cluster(**spec)`` starts a :class:`ProxiedCluster` (ZooKeeper, brokers and the
built-in Toxiproxy server as child processes) under pytest's temporary directory and stops it
when the test ends, whatever happened; when a test fails the log paths are printed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest

from harness.cluster.proxied import ProxiedCluster
from harness.cluster.spec import ClusterSpec
from harness.net.ports import LOOPBACK
from harness.raw_client import RawClient

API_VERSIONS = 18

_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    item.stash.setdefault(_REPORTS, {})[report.when] = report
    return report


@pytest.fixture
def proxied_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., ProxiedCluster]]:
    """A factory: ``proxied_cluster(brokers=3, **ClusterSpec fields)`` → a started cluster."""
    started: list[ProxiedCluster] = []

    def make(**spec: Any) -> ProxiedCluster:
        cluster = ProxiedCluster(ClusterSpec(**spec),
                                 run_dir=tmp_path_factory.mktemp(f"proxied-{len(started)}"))
        started.append(cluster)
        cluster.start()
        return cluster

    yield make
    paths = [path for cluster in started for path in cluster.log_paths()]
    for cluster in reversed(started):
        cluster.stop()
    if any(report.failed for report in request.node.stash.get(_REPORTS, {}).values()):
        print("cluster logs:\n  " + "\n  ".join(str(path) for path in paths))


def api_versions_round_trip(port: int, client: RawClient | None = None,
                            timeout: float = 5.0) -> float:
    """Seconds one raw ApiVersions request takes to be answered (on ``client`` if given)."""
    if client is None:
        with RawClient(LOOPBACK, port, timeout=timeout) as fresh:
            return api_versions_round_trip(port, fresh)
    started = time.perf_counter()
    response = client.request(API_VERSIONS, 3, {"client_software_name": "kafka-harness-test",
                                                "client_software_version": "1"})
    elapsed = time.perf_counter() - started
    assert response.error_code == 0
    return elapsed


def listen_port(cluster: ProxiedCluster, link: str) -> int:
    return cluster.links[link][1]
