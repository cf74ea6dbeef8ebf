"""Fixtures for tests that run a whole local cluster: ZooKeeper plus reference brokers.

``cluster(...)`` starts a :class:`LocalCluster` under the test's ``tmp_path`` and stops it when
the test ends, whatever happened: for a test that needs settings of its own or that ends the
cluster itself. ``shared_cluster`` is one cluster per module, started from the module's
``SHARED_CLUSTER`` spec and made whole again after each test (paused brokers resumed, stopped
or killed ones started, every broker registered and listed by every other): starting ZooKeeper
and three brokers costs more than most of these tests, so a module pays it once. Tests on the
shared cluster use topic names of their own, so their order does not matter
(:mod:`tests.shared_clusters`). When a test fails its cluster's log paths are printed with the
failure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest

from harness.cluster.local import LocalCluster
from harness.cluster.spec import ClusterSpec
from tests.shared_clusters import failed, module_spec, print_logs, reset_after, restore, running


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
    if failed(request.node):
        print_logs([path for local in started for path in local.log_paths()])


@pytest.fixture(scope="module")
def _module_cluster(request: pytest.FixtureRequest,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from running(LocalCluster(module_spec(request),
                                    run_dir=tmp_path_factory.mktemp("shared-cluster")))


@pytest.fixture
def shared_cluster(request: pytest.FixtureRequest,
                   _module_cluster: LocalCluster) -> Iterator[LocalCluster]:
    """The module's cluster (its ``SHARED_CLUSTER`` spec), whole again after the test."""
    yield from reset_after(request, _module_cluster, _module_cluster.log_paths(),
                           partial(restore, _module_cluster))
