"""The kafka-harness pytest plugin (entry point ``pytest11``): a target for every test session.

Options: ``--target reference|tansu|librdkafka-mock|external`` (default ``reference``: ZooKeeper
and reference brokers with every link behind a proxy), ``--bootstrap`` (for ``external``),
``--brokers`` (default 3), ``--network proxy|kernel`` (how the reference target's network faults
are made: Toxiproxy on every link, or — root only — network namespaces and iptables drops, which
refuse toxics), ``--backend local|docker`` (where the reference target's nodes run: processes
on this machine, or containers behind a Toxiproxy container with partitions cut by iptables
inside them), ``--harness-dir`` (where runs keep their logs; default a temporary
directory that is removed unless a test failed).

Fixtures: ``cluster`` (the session's :class:`~harness.cluster.targets.Target`, started on first
use; after each test its faults are healed and stopped brokers restarted), ``faults`` (its
network faults), ``admin``, ``producer`` and ``consumer`` (factories of confluent-kafka clients
that are closed after the test) and ``raw_client`` (a factory of raw-protocol clients on
``harness.wire``).

Markers declare what a test needs — ``requires_faults``, ``requires_process_faults``,
``requires_zookeeper``, ``requires_controller``, ``requires_multi_broker``,
``requires_create_topics`` — and a target without it skips the test with the precise reason.
When a test fails, the paths of the target's logs are printed and the run directory is kept.
"""

from __future__ import annotations

import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.cluster.kinds import Capability
from harness.cluster.targets import (
    Backend,
    Network,
    Target,
    TargetError,
    TargetName,
    check_options,
    start_target,
)

_STATE = pytest.StashKey[dict[str, Any]]()

# Broker settings of the reference target, as Kafka's own integration tests set them: the first
# JoinGroup of a new group is not held back by group.initial.rebalance.delay.ms (3 s otherwise).
# Groups start at once (no initial rebalance delay), and a group is full at 6 members (the suites
# use at most 3), so the groups suite can see GROUP_MAX_SIZE_REACHED: Kafka's default,
# 2147483647, cannot be reached.
SUITE_BROKER_PROPERTIES = {"group.initial.rebalance.delay.ms": 0, "group.max.size": 6}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kafka-harness", "kafka-harness targets")
    group.addoption("--target", choices=[t.value for t in TargetName], default="reference",
                    help="what the suites run against (default: reference)")
    group.addoption("--bootstrap", default=None,
                    help="bootstrap servers of an external target (host:port,...)")
    group.addoption("--brokers", type=int, default=3,
                    help="brokers of the reference target (default: 3)")
    group.addoption("--network", choices=[n.value for n in Network], default="proxy",
                    help="network faults of the reference target: proxy (Toxiproxy, default) "
                         "or kernel (root: namespaces + iptables drops, no toxics)")
    group.addoption("--backend", choices=[b.value for b in Backend], default="local",
                    help="where the reference target runs: local processes (default) or "
                         "docker containers")
    group.addoption("--harness-dir", default=None,
                    help="run directory for targets the harness starts (kept after the run)")


def pytest_configure(config: pytest.Config) -> None:
    for capability in Capability:
        config.addinivalue_line(
            "markers", f"requires_{capability.value}: skip unless the target {capability.reason}")
    config.stash[_STATE] = {"target": None, "failed": False, "run_dir": None}
    try:
        check_options(config.getoption("--target"), config.getoption("--bootstrap"),
                      config.getoption("--brokers"), config.getoption("--network"),
                      config.getoption("--backend"))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_report_header(config: pytest.Config) -> str:
    """Which target the session runs against, and its brokers' version where the harness
    knows it before starting them (a failing run's log then says what it tested)."""
    target = config.getoption("--target")
    where = (f"bootstrap {config.getoption('--bootstrap')}" if target == TargetName.EXTERNAL
             else f"network {config.getoption('--network')}, "
                  f"backend {config.getoption('--backend')}")
    return f"kafka-harness target: {target}{_version_note(target)} ({where})"


def _version_note(target: str) -> str:
    from harness.cluster.factory import BROKER_KINDS

    try:
        if target in BROKER_KINDS:
            return f" {BROKER_KINDS[target]().version()}"
        if target == TargetName.APACHE_KAFKA_KRAFT:
            from harness.cluster.apache_kafka import KafkaDistribution

            return f" {KafkaDistribution.find('4').version}"
    except RuntimeError as exc:  # no jars yet: starting the target will say so again
        return f" (version unknown: {exc})"
    return ""


def _needs(item: pytest.Item) -> list[str]:
    return [mark.name.removeprefix("requires_") for mark in item.iter_markers()
            if mark.name.startswith("requires_")
            and mark.name.removeprefix("requires_") in set(Capability)]


def _interrupt_on_sigterm() -> None:
    """SIGTERM (a CI job cancelled, ``timeout``) would end pytest without its teardown and leave
    the target's processes running in their own sessions. Raised as KeyboardInterrupt, it stops
    pytest the way Ctrl-C does: fixtures are torn down and the target is closed. A handler the
    user installed is left alone."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    signal.signal(signal.SIGTERM, interrupt)


def _session_target(config: pytest.Config) -> Target:
    state = config.stash[_STATE]
    if state["target"] is None:
        _interrupt_on_sigterm()
        given = config.getoption("--harness-dir")
        run_dir = Path(given) if given else Path(tempfile.mkdtemp(prefix="kafka-harness-"))
        run_dir.mkdir(parents=True, exist_ok=True)
        state["run_dir"] = run_dir
        state["keep"] = bool(given)
        try:
            state["target"] = start_target(
                config.getoption("--target"), brokers=config.getoption("--brokers"),
                bootstrap=config.getoption("--bootstrap"), run_dir=run_dir / "target",
                properties=SUITE_BROKER_PROPERTIES, network=config.getoption("--network"),
                backend=config.getoption("--backend"))
        except TargetError as exc:
            pytest.fail(f"{exc} (infrastructure)", pytrace=False)
    return state["target"]


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[Target]:
    target = _session_target(request.config)
    for needed in _needs(request.node):
        reason = target.missing(needed)
        if reason is not None:
            pytest.skip(reason)
    yield target
    target.reset()


@pytest.fixture
def faults(cluster: Target) -> Any:
    if cluster.faults is None:
        pytest.skip(cluster.missing("faults") or "the target offers no faults")
    return cluster.faults


@pytest.fixture
def admin(cluster: Target) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": cluster.bootstrap})


@pytest.fixture
def producer(cluster: Target) -> Iterator[Callable[..., Any]]:
    from confluent_kafka import Producer

    made: list[Any] = []

    def make(**config: Any) -> Any:
        client = Producer({"bootstrap.servers": cluster.bootstrap, **config})
        made.append(client)
        return client

    yield make
    for client in made:
        client.flush(10)


@pytest.fixture
def consumer(cluster: Target) -> Iterator[Callable[..., Any]]:
    from confluent_kafka import Consumer

    made: list[Any] = []

    def make(**config: Any) -> Any:
        config.setdefault("group.id", f"harness-{len(made)}")
        client = Consumer({"bootstrap.servers": cluster.bootstrap, **config})
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@pytest.fixture
def raw_client(cluster: Target) -> Iterator[Callable[..., Any]]:
    from harness.raw_client import RawClients

    clients = RawClients(cluster.bootstrap)
    yield clients
    clients.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed:
        state = item.config.stash[_STATE]
        state["failed"] = True
        target: Target | None = state["target"]
        if target is not None and target.cluster is not None:
            paths = "\n  ".join(str(p) for p in target.cluster.cluster.log_paths())
            report.sections.append(("kafka-harness", f"target logs (kept):\n  {paths}"))
    return report


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if not state or state["target"] is None:
        return
    state["target"].close()
    run_dir = state["run_dir"]
    if run_dir is not None and not state["failed"] and not state.get("keep"):
        shutil.rmtree(run_dir, ignore_errors=True)
