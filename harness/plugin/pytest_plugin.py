"""The kafka-harness pytest plugin (entry point ``pytest11``): a target for every test session.

Options (all ``--kafka-``-prefixed, see :mod:`harness.plugin.options`): ``--kafka-target
reference|apache-kafka|apache-kafka-kraft|tansu|kfake|librdkafka-mock|external`` (default
``reference``: ZooKeeper and reference brokers with every link behind a proxy),
``--kafka-bootstrap-server H:P`` (alone it means "test the broker at H:P"), ``--kafka-brokers``
(default 3), ``--kafka-network proxy|kernel`` (Toxiproxy on every link, or — root only —
network namespaces and iptables drops, which refuse toxics), ``--kafka-backend local|docker``
(processes on this machine, or containers behind a Toxiproxy container),
``--kafka-harness-dir`` (keep the started target's logs there), ``--kafka-recipe FILE`` (a
cluster of the broker a recipe file describes, every fault its recipe claims: see
``docs/recipes.md``; implies ``--kafka-target recipe``) and the chaos suite's
``--kafka-chaos-duration``, ``--kafka-chaos-long-duration``, ``--kafka-chaos-seed``.

Fixtures, all ``kafka_``-prefixed so they cannot collide with a user's own: ``kafka_target``
(the session's :class:`~harness.cluster.targets.Target`, started on first use; after each test
its faults are healed and stopped nodes restarted), ``kafka_session_target`` (the same target,
session-scoped, without the per-test reset), ``kafka_faults`` (its network faults),
``kafka_admin``, ``kafka_producer`` and ``kafka_consumer`` (confluent-kafka clients, closed after
the test), ``kafka_raw_client`` (raw-protocol clients on ``harness.wire``) and ``kafka_names``
(names under the session's prefix). The first release's names (``cluster``, ``faults``,
``admin``, ``producer``, ``consumer``, ``raw_client``; ``--target``, ``--bootstrap``, …) work for
one more release and warn.

Markers declare what a test needs — ``requires_faults``, ``requires_process_faults``,
``requires_zookeeper``, ``requires_controller``, ``requires_multi_broker``,
``requires_create_topics``, ``requires_lone_broker``, ``requires_quorum``,
``requires_transactions`` — and a target without
it skips the test with the precise reason.
When a test fails, the paths of the target's logs are printed and the run directory is kept. On
a broker the harness did not start, the topics and groups the session made (all under its
prefix) are deleted at the end (:mod:`harness.plugin.cleanup`).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harness.cluster.errors import TargetError
from harness.cluster.kinds import Capability
from harness.cluster.registry import BROKER_KINDS
from harness.plugin.options import KafkaOptions, add_options, kafka_options, scoped_name
from harness.plugin.options import configure as configure_options

if TYPE_CHECKING:
    from harness.cluster.factory import Faults
    from harness.cluster.targets import Target

__all__ = ["SUITE_BROKER_PROPERTIES", "KafkaOptions", "kafka_options", "new_name"]

# Broker settings of a target the harness starts, as Kafka's own integration tests set them:
# groups start at once (no group.initial.rebalance.delay.ms, 3 s otherwise), and a group is full
# at 6 members (the suites use at most 3), so the groups suite can see GROUP_MAX_SIZE_REACHED:
# Kafka's default, 2147483647, cannot be reached. The transaction coordinator looks for
# transactions past their timeout every 0.5 s instead of every 10 s, so the transactions
# suite's abandoned transaction is aborted within a second of its timeout.
SUITE_BROKER_PROPERTIES = {"group.initial.rebalance.delay.ms": 0, "group.max.size": 6,
                           "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500}

MARKERS = {
    "slow": "long-running tests kept out of the default CI run",
    "chaos_long": "the long chaos run (duration from --kafka-chaos-duration)",
    "docker": "the docker backend; starts an engine if it can and builds images (heavy)",
}


@dataclass
class _Session:
    """What one pytest process (one xdist worker) holds: its target and where its logs are."""

    target: Target | None = None
    run_dir: Path | None = None
    keep: bool = False
    failed: bool = False
    named: bool = False  # a name under the prefix was handed out: there may be things to delete
    notes: list[str] = field(default_factory=list)


_SESSION = pytest.StashKey[_Session]()


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    for capability in Capability:
        config.addinivalue_line(
            "markers", f"requires_{capability.value}: skip unless the target {capability.reason}")
    for name, meaning in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {meaning}")
    config.stash[_SESSION] = _Session()
    configure_options(config)


def pytest_report_header(config: pytest.Config) -> str:
    """Which target the session runs against, and its brokers' version where the harness
    knows it before starting them (a failing run's log then says what it tested)."""
    options = kafka_options(config)
    where = (f"bootstrap server {options.bootstrap}" if not options.started_by_harness
             else f"network {options.network}, backend {options.backend}")
    if options.recipe is not None:
        where = f"recipe {options.recipe}, {where}"
    return (f"kafka-harness target: {options.target}{_version_note(options.target)} ({where}); "
            f"names under {options.name_prefix!r}")


def _version_note(target: str) -> str:
    try:
        if target in BROKER_KINDS:
            return f" {BROKER_KINDS[target]().version()}"
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


def _run_dir(config: pytest.Config, options: KafkaOptions) -> tuple[Path, bool]:
    """Where the started target keeps its logs; each xdist worker gets a directory of its own."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if options.harness_dir is not None:
        run_dir = options.harness_dir / worker if worker else options.harness_dir
        keep = True
    else:
        run_dir, keep = Path(tempfile.mkdtemp(prefix="kafka-harness-")), False
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir, keep


def _session_target(config: pytest.Config) -> Target:
    session = config.stash[_SESSION]
    if session.target is None:
        # The cluster machinery (kio, kazoo, the docker SDK: a third of a second) is loaded
        # only once a test asks for a target: pytest loads this plugin into every session of
        # the environment, most of which never will.
        from harness.cluster.targets import start_target

        _interrupt_on_sigterm()
        options = kafka_options(config)
        session.run_dir, session.keep = _run_dir(config, options)
        try:
            session.target = start_target(
                options.target, brokers=options.brokers, bootstrap=options.bootstrap,
                run_dir=session.run_dir / "target", properties=SUITE_BROKER_PROPERTIES,
                network=options.network, backend=options.backend, recipe=options.recipe,
                controllers=options.controllers)
        except TargetError as exc:
            pytest.fail(f"{exc} (infrastructure)", pytrace=False)
    return session.target


@pytest.fixture(scope="session")
def kafka_session_target(request: pytest.FixtureRequest) -> Target:
    """The session's target, started on first use and closed when the session ends."""
    return _session_target(request.config)


@pytest.fixture
def kafka_target(request: pytest.FixtureRequest, kafka_session_target: Target) -> Iterator[Target]:
    """The session's target for one test: skipped when it lacks what the test's
    ``requires_*`` markers name, healed and restarted after the test."""
    for needed in _needs(request.node):
        reason = kafka_session_target.missing(needed)
        if reason is not None:
            pytest.skip(reason)
    yield kafka_session_target
    kafka_session_target.reset()


@pytest.fixture
def kafka_faults(kafka_target: Target) -> Faults:
    if kafka_target.faults is None:
        pytest.skip(kafka_target.missing("faults") or "the target offers no faults")
    return kafka_target.faults


def new_name(request: pytest.FixtureRequest, kind: str = "") -> str:
    """A new name under the session's prefix (deleted from a shared broker at the end), with
    the kind (topic, group, …) and the test's name in it for whoever reads the broker."""
    request.config.stash[_SESSION].named = True
    return scoped_name(kafka_options(request.config).name_prefix, request.node.name, kind)


@pytest.fixture
def kafka_names(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """``kafka_names(kind="") -> name``: see :func:`new_name`."""

    def name(kind: str = "") -> str:
        return new_name(request, kind)

    return name


@pytest.fixture
def kafka_admin(kafka_target: Target) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": kafka_target.bootstrap})


def _client_config(target: Target, config: Mapping[str, Any] | None,
                   more: Mapping[str, Any]) -> dict[str, Any]:
    """A client factory's configuration: confluent-kafka's own convention, a dict with Kafka's
    dotted keys (``{"enable.idempotence": True}``), and/or keywords for the undotted ones
    (``acks="all"``); the keywords win, the target's bootstrap comes first."""
    return {"bootstrap.servers": target.bootstrap, **(config or {}), **more}


@pytest.fixture
def kafka_producer(kafka_target: Target) -> Iterator[Callable[..., Any]]:
    from confluent_kafka import Producer

    made: list[Any] = []

    def make(config: Mapping[str, Any] | None = None, /, **more: Any) -> Any:
        client = Producer(_client_config(kafka_target, config, more))
        made.append(client)
        return client

    yield make
    for client in made:
        client.flush(10)


@pytest.fixture
def kafka_consumer(kafka_target: Target,
                   kafka_names: Callable[[str], str]) -> Iterator[Callable[..., Any]]:
    from confluent_kafka import Consumer

    made: list[Any] = []

    def make(config: Mapping[str, Any] | None = None, /, **more: Any) -> Any:
        merged = _client_config(kafka_target, config, more)
        merged.setdefault("group.id", kafka_names("group"))
        client = Consumer(merged)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@pytest.fixture
def kafka_raw_client(kafka_target: Target) -> Iterator[Callable[..., Any]]:
    # kio, under harness.wire, takes a tenth of a second to load; only tests that ask for it.
    from harness.raw_client import RawClients

    clients = RawClients(kafka_target.bootstrap)
    yield clients
    clients.close()


def _deprecated_alias(old: str, new: str) -> Any:
    @pytest.fixture(name=old)
    def alias(request: pytest.FixtureRequest) -> Any:
        warnings.warn(pytest.PytestDeprecationWarning(
            f"the fixture {old!r} is deprecated and will be removed in the next release; "
            f"use {new!r}"), stacklevel=2)
        return request.getfixturevalue(new)

    return alias


# The first release's fixture names, kept one more release.
for _old, _new in {"cluster": "kafka_target", "faults": "kafka_faults", "admin": "kafka_admin",
                   "producer": "kafka_producer", "consumer": "kafka_consumer",
                   "raw_client": "kafka_raw_client"}.items():
    globals()[f"_deprecated_{_old}"] = _deprecated_alias(_old, _new)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed:
        session = item.config.stash[_SESSION]
        session.failed = True
        target = session.target
        if target is not None and target.cluster is not None:
            paths = "\n  ".join(str(p) for p in target.cluster.cluster.log_paths())
            report.sections.append(("kafka-harness", f"target logs (kept):\n  {paths}"))
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On a broker the user owns, delete what this session made (under its prefix)."""
    state = session.config.stash.get(_SESSION, None)
    options = kafka_options(session.config) if state is not None else None
    if (state is None or state.target is None or options is None or options.started_by_harness
            or not state.named):
        return
    # confluent-kafka's admin client: only when there is something to delete.
    from harness.plugin.cleanup import clean

    try:
        state.notes.append(clean(state.target.bootstrap, options.name_prefix)
                           .summary(options.name_prefix))
    except Exception as exc:  # noqa: BLE001 - a cleanup failure is reported, not raised
        state.notes.append(f"kafka-harness cleanup of {options.name_prefix!r} failed: "
                           f"{type(exc).__name__}: {exc}")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(_SESSION, None)
    for note in state.notes if state is not None else []:
        terminalreporter.write_line(note)


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_SESSION, None)
    if state is None or state.target is None:
        return
    state.target.close()
    if state.run_dir is not None and not state.failed and not state.keep:
        shutil.rmtree(state.run_dir, ignore_errors=True)
