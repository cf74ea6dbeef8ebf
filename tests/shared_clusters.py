"""What tests that share one cluster across a module do between tests: make it whole again.

Starting ZooKeeper and three brokers costs more than most cluster tests, so a module whose
tests only read the cluster, or fault one node and put it back, starts one and shares it. Each
test must then find it as a freshly started one is: every broker running and registered, and
listed by every other — which :func:`restore` waits for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol, TypeVar

import pytest

from harness.cluster.local import LocalCluster
from harness.cluster.nodes import wait_until_whole
from harness.cluster.spec import ClusterSpec

RESTORE_TIMEOUT_S = 60.0
REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()
"""Each test's reports by phase, kept by the suite-wide conftest's hook."""


def failed(node: pytest.Item) -> bool:
    """Whether any phase of the test so far (setup, call) failed."""
    return any(report.failed for report in node.stash.get(REPORTS, {}).values())


def print_logs(paths: list[Path]) -> None:
    """Where a failed test's cluster logged, printed with the failure (pytest shows a failed
    test's output): the run directories are pytest's, so the logs outlive the test."""
    print("cluster logs:\n  " + "\n  ".join(str(path) for path in paths))


class _Runnable(Protocol):
    def start(self) -> object: ...

    def stop(self) -> None: ...


C = TypeVar("C", bound=_Runnable)


def module_spec(request: pytest.FixtureRequest) -> ClusterSpec:
    """The ``SHARED_CLUSTER`` spec the requesting test module declares for its cluster."""
    spec = getattr(request.module, "SHARED_CLUSTER", None)
    assert isinstance(spec, ClusterSpec), \
        f"{request.module.__name__} must declare SHARED_CLUSTER, a ClusterSpec"
    return spec


def reset_after(request: pytest.FixtureRequest, cluster: C, log_paths: list[Path],
                reset: Callable[[], None]) -> Iterator[C]:
    """``cluster`` for one test, then ``reset`` — after printing ``log_paths`` if it failed,
    so that the logs show what the test saw, not the reset."""
    yield cluster
    if failed(request.node):
        print_logs(log_paths)
    reset()


def running(cluster: C) -> Iterator[C]:
    """``cluster`` started, for a module fixture to yield from; stopped however it ends."""
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def restore(local: LocalCluster) -> None:
    """Resume what is paused, start what is stopped or killed (once its old registration has
    expired), and wait until every broker is registered and every broker's Metadata lists
    all of them."""
    for broker_id in sorted(local.paused):
        local.resume(broker_id)
    for broker_id, broker in local.brokers.items():
        if not broker.is_running():
            local.start_broker(broker_id)
    wait_until_whole(local, RESTORE_TIMEOUT_S, "after the test")
