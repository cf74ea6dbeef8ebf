"""Fixtures for the fault tests: real 3-broker clusters with every link behind a proxy.

``proxied_cluster(**spec)`` starts a :class:`ProxiedCluster` (ZooKeeper, brokers and the
Toxiproxy server as child processes) under pytest's temporary directory and stops it when the
test ends, whatever happened; when a test fails the log paths are printed.
``shared_proxied_cluster`` is one such cluster per module, from the module's ``SHARED_CLUSTER``
spec, whose faults are cleared and whose brokers are made whole after each test
(:mod:`tests.shared_clusters`): a module of tests that each fault a link and lift it again
pays for ZooKeeper, three brokers and the proxies once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harness.cluster.local import LocalCluster
from harness.cluster.proxied import ProxiedCluster
from harness.cluster.proxy_faults import NetworkFaults
from harness.cluster.spec import ClusterSpec
from harness.net.ports import LOOPBACK
from harness.raw_client import RawClient
from tests.shared_clusters import failed, module_spec, print_logs, reset_after, restore, running

API_VERSIONS = 18


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
    if failed(request.node):
        print_logs(paths)


@pytest.fixture(scope="module")
def _module_proxied_cluster(request: pytest.FixtureRequest,
                            tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxiedCluster]:
    yield from running(ProxiedCluster(module_spec(request),
                                      run_dir=tmp_path_factory.mktemp("shared-proxied")))


@pytest.fixture
def shared_proxied_cluster(request: pytest.FixtureRequest,
                           _module_proxied_cluster: ProxiedCluster) -> Iterator[ProxiedCluster]:
    """The module's proxied cluster, every fault lifted and every broker back after the test."""
    local = _module_proxied_cluster.cluster
    assert isinstance(local, LocalCluster)

    def reset() -> None:
        NetworkFaults(_module_proxied_cluster).clear()
        restore(local)

    yield from reset_after(request, _module_proxied_cluster, _module_proxied_cluster.log_paths(),
                           reset)


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
