"""Apache Kafka as a broker kind: its own jars, started as Kafka's start script starts them.

``kafka-server-start.sh`` amounts to ``java <heap opts> <jvm opts> -Dlog4j... -cp 'libs/*'
kafka.Kafka server.properties``; this module does the same with the jars ``ci/setup.sh`` fetched
from the Maven registry (``.harness/vendor/kafka-3.9/libs``, ``.../kafka-4/libs``) or with a
distribution the user already has (``$KAFKA_HOME`` with ``libs/``: it serves the kind whose line
its ``kafka_2.13-<version>.jar`` belongs to). ``$KAFKA_HEAP_OPTS`` and
``$KAFKA_JVM_PERFORMANCE_OPTS`` are honoured as the script honours them; the defaults here are
small heaps (three brokers and ZooKeeper share two cores in CI).

The kind:

* ``apache-kafka`` — 3.9 in ZooKeeper mode, the last line that has it, so the harness's
  ZooKeeper-mode cluster (controller and ISR in znodes, every fault) runs on the real thing.
  Pair-exact inter-broker links: a Kafka broker dials the address its peer advertises for the
  listener named by its *own* ``inter.broker.listener.name``, so broker ``j`` gets one listener
  ``BROKER<i>`` per source broker ``i``, advertised at the address ``i`` must use to reach it
  (through the ``broker-i->broker-j`` proxy), and broker ``i`` sets
  ``inter.broker.listener.name=BROKER<i>``. Follower fetches, controller requests and
  AlterPartition all follow that rule, so a cut of one directed pair cuts exactly that pair.

KRaft (4.x) is a kind of its own, :mod:`harness.cluster.kraft`, on the same jars and command.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from harness.cluster.errors import PeerStartError
from harness.cluster.kinds import (
    ZOOKEEPER_MODE,
    BrokerWiring,
    ContainerLaunch,
    Wrap,
    properties_text,
)
from harness.cluster.peers import ConfiguredBroker, write_atomically
from harness.cluster.zookeeper import find_java
from harness.vendor import FETCH_HINT, vendor_dir

KAFKA_HOME_ENV = "KAFKA_HOME"
HEAP_OPTS_ENV = "KAFKA_HEAP_OPTS"
JVM_OPTS_ENV = "KAFKA_JVM_PERFORMANCE_OPTS"
DEFAULT_HEAP_OPTS = "-Xms256m -Xmx512m"
# Kafka's own start script's performance options.
DEFAULT_JVM_OPTS = ("-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 "
                    "-XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent "
                    "-Djava.awt.headless=true")
# For brokers that live for seconds, as a test's do: the JIT stops at its quick first tier and
# one serial collector replaces G1's threads, so a broker reaches service on about half the
# CPU (tests/apache_kafka in two workers: 188 CPU-s as user time with the defaults, 112 with
# these; docs/setup.md). Peak throughput is lower, so benchmarks and soaks keep the defaults;
# the test command opts in through $KAFKA_JVM_PERFORMANCE_OPTS (tests/conftest.py).
SHORT_LIVED_JVM_OPTS = ("-server -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData "
                        "-Djava.awt.headless=true")
CLIENT_LISTENER = "CLIENT"
CONTAINER_LIBS = "/opt/kafka/libs"  # where a container finds the jars, in the project image
_CORE_JAR = re.compile(r"^kafka_2\.1[23]-(\d+)\.(\d+)\.(\d+)\.jar$")
# What Kafka 3.9 logs when its own new ZooKeeper session expired before its startup was done:
# the fatal line, then the exception's class.
_STARTUP_SESSION_EXPIRED = re.compile(
    r"Exiting Kafka due to fatal exception during startup.*\n"
    r"org\.apache\.zookeeper\.KeeperException\$SessionExpiredException")


def broker_listener(source: int) -> str:
    """The listener on which broker ``source``'s connections arrive."""
    return f"BROKER{source}"


@dataclass(frozen=True)
class KafkaDistribution:
    """A directory of Kafka's runtime jars and the version of its core jar."""

    libs: Path
    version: str

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def classpath(self) -> str:
        return f"{self.libs}/*"

    @classmethod
    def at(cls, libs: Path) -> KafkaDistribution | None:
        """The distribution in ``libs``, None when no Kafka core jar is there."""
        if not libs.is_dir():
            return None
        for jar in sorted(libs.iterdir()):
            match = _CORE_JAR.match(jar.name)
            if match:
                return cls(libs, ".".join(match.groups()))
        return None

    @classmethod
    def find(cls, line: str) -> KafkaDistribution:
        """The distribution of Kafka ``line`` (``"3.9"`` or ``"4"``): ``$KAFKA_HOME/libs`` when
        it holds that line, else the one set-up fetched; PeerStartError naming both if neither.
        """
        home = os.environ.get(KAFKA_HOME_ENV)
        if home:
            found = cls.at(Path(home) / "libs")
            if found is not None and _in_line(found.version, line):
                return found
        vendored = vendor_dir() / f"kafka-{line}" / "libs"
        found = cls.at(vendored)
        if found is not None and _in_line(found.version, line):
            return found
        raise PeerStartError(
            f"no Apache Kafka {line} jars: {vendored} has none"
            + (f" and ${KAFKA_HOME_ENV}={home} holds no Kafka {line}" if home else "")
            + f"; {FETCH_HINT}, or set ${KAFKA_HOME_ENV} to a Kafka {line} distribution")


def _in_line(version: str, line: str) -> bool:
    return version == line or version.startswith(f"{line}.")


class ApacheKafkaBroker(ConfiguredBroker):
    """One Apache Kafka broker process (ZooKeeper mode) configured by ``server.properties``."""

    name = "kafka"

    def __init__(self, run_dir: Path | str | None = None, *,
                 distribution: KafkaDistribution, **kwargs) -> None:
        super().__init__(run_dir, **kwargs)
        self.distribution = distribution
        self.startup_session_expiries = 0
        """Starts done again because the broker's session expired during its startup."""

    def start(self) -> Self:
        """Start; once more if Kafka exited because its own new ZooKeeper session expired
        before its startup was done.

        Kafka in ZooKeeper mode treats that as fatal. It happens when the JVM is starved of CPU
        for two thirds of the session, which the harness keeps short (6 s, so that a killed
        broker's registration goes soon): measured on 2026-12-07, a broker restarted after a
        SIGKILL on a loaded 2-core machine, recovering its logs, went 4.2 s without a word to
        ZooKeeper and exited. That is the machine's fault, not the broker's, and a supervisor
        that restarts a failed broker would start it again; any other failure to start is
        raised as it is."""
        since = self._log_size()
        try:
            return super().start()
        except PeerStartError:
            if not _STARTUP_SESSION_EXPIRED.search(self._log_since(since)):
                raise
        self.startup_session_expiries += 1
        return super().start()

    def _log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except (OSError, RuntimeError):  # no log yet, or no run directory before a first start
            return 0

    def _log_since(self, offset: int) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(offset)
                return log.read().decode(errors="replace")
        except OSError:
            return ""

    def _prepare(self) -> None:
        super()._prepare()
        write_atomically(self._logging_config_path, logging_config(self.distribution.major))

    @property
    def _logging_config_path(self) -> Path:
        return self.run_dir / logging_config_name(self.distribution.major)

    def jvm_command(self, main_class: str, *args: str) -> list[str]:
        """``java`` with Kafka's options and classpath, running ``main_class``."""
        return kafka_jvm_command(find_java(), self.distribution, str(self.run_dir),
                                 main_class, *args)

    def _command(self) -> list[str]:
        return self.jvm_command("kafka.Kafka", str(self.properties_path))


def logging_config_name(major: int) -> str:
    """Kafka 3 logs with log4j 1 (its reload4j), Kafka 4 with log4j 2."""
    return "log4j.properties" if major < 4 else "log4j2.properties"


def logging_config(major: int) -> str:
    """Everything to stdout, which is the node's log file: one file to read on failure."""
    if major < 4:
        return ("log4j.rootLogger=INFO, stdout\n"
                "log4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
                "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n"
                "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
                "log4j.logger.kafka.request.logger=WARN\n"
                "log4j.logger.org.apache.zookeeper=WARN\n")
    return ("appender.out.type=Console\n"
            "appender.out.name=out\n"
            "appender.out.layout.type=PatternLayout\n"
            "appender.out.layout.pattern=[%d] %p %m (%c)%n\n"
            "rootLogger.level=INFO\n"
            "rootLogger.appenderRef.out.ref=out\n")


def kafka_jvm_command(java: str, distribution: KafkaDistribution, run_dir: str,
                      main_class: str, *args: str) -> list[str]:
    """What ``kafka-run-class.sh`` runs: ``java`` with Kafka's heap and performance options,
    the logging config in ``run_dir`` and the classpath of ``distribution``. Paths are taken
    as given, so the same command serves a local process and a container (where the jars and
    ``run_dir`` are somewhere else)."""
    heap = os.environ.get(HEAP_OPTS_ENV, DEFAULT_HEAP_OPTS)
    jvm = os.environ.get(JVM_OPTS_ENV, DEFAULT_JVM_OPTS)
    config = f"{run_dir}/{logging_config_name(distribution.major)}"
    logging = (f"-Dlog4j.configuration=file:{config}" if distribution.major < 4
               else f"-Dlog4j2.configurationFile={config}")
    return [java, *shlex.split(heap), *shlex.split(jvm), logging,
            f"-Dkafka.logs.dir={run_dir}", "-cp", distribution.classpath, main_class, *args]


class ApacheKafkaKind:
    """``apache-kafka``: Apache Kafka 3.9 brokers in ZooKeeper mode (see the module doc)."""

    name = "apache-kafka"
    capabilities = ZOOKEEPER_MODE
    listener_per_peer = True
    needs_zookeeper = True
    controller_quorum = False
    log_name = ApacheKafkaBroker.name
    # kafka.Kafka shuts down in a JVM shutdown hook on SIGTERM, after which the JVM exits with
    # 128 + 15, as every JVM killed by a signal does; 0 only when it stops on its own.
    clean_exit_codes = frozenset({0, 143})

    def __init__(self, distribution: KafkaDistribution | None = None) -> None:
        self._distribution = distribution

    @property
    def distribution(self) -> KafkaDistribution:
        if self._distribution is None:
            self._distribution = KafkaDistribution.find("3.9")
        return self._distribution

    def version(self) -> str:
        return self.distribution.version

    def wiring_properties(self, wiring: BrokerWiring) -> dict[str, str | int]:
        me = wiring.broker_id
        sources = sorted(wiring.ports.inbound)
        listeners = [f"{CLIENT_LISTENER}://{wiring.host}:{wiring.ports.client}"] + [
            f"{broker_listener(i)}://{wiring.host}:{wiring.ports.inbound[i]}" for i in sources]
        advertised = [f"{CLIENT_LISTENER}://{wiring.advertised_client}"] + [
            f"{broker_listener(i)}://{wiring.dialled_at[i]}" for i in sources]
        protocols = [f"{name.split('://')[0]}:PLAINTEXT" for name in listeners]
        brokers = len(sources)
        return {
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(advertised),
            "listener.security.protocol.map": ",".join(protocols),
            "inter.broker.listener.name": broker_listener(me),
            "zookeeper.connect": wiring.zookeeper_connect,
            "transaction.state.log.replication.factor": min(3, brokers),
            "transaction.state.log.min.isr": min(2, brokers),
        }

    def container_launch(self, properties: Mapping[str, str | int],
                         config_dir: str) -> ContainerLaunch:
        """``kafka.Kafka`` as :meth:`ApacheKafkaBroker.jvm_command` runs it, on the image's
        JRE (the one ZooKeeper runs on), from the jars :meth:`image_directories` put in it."""
        inside = KafkaDistribution(Path(CONTAINER_LIBS), self.distribution.version)
        server = f"{config_dir}/server.properties"
        return ContainerLaunch(
            command=tuple(kafka_jvm_command("java", inside, config_dir, "kafka.Kafka", server)),
            files={"server.properties": properties_text({"num.partitions": 1, **properties}),
                   logging_config_name(inside.major): logging_config(inside.major)})

    def image_directories(self) -> dict[str, Path]:
        """This kind's jars (the vendored 3.9 or ``$KAFKA_HOME``'s), copied into the project
        image at :data:`CONTAINER_LIBS`; none where there are none (then
        :meth:`container_launch` says how to fetch them).

        Copied rather than bind-mounted from the host: a mount names a path on the engine's
        host, which is not this process's file system when the harness runs in a container
        that shares the host's engine — CI's docker job (``-v /var/run/docker.sock``) — or
        talks to a remote one; an image carries them wherever it runs. The image's tag hashes
        the jars with the sources, so a new Kafka version (or another ``$KAFKA_HOME``) is a
        rebuild from the jars' layer on (the apt layer before it stays cached), and a change
        of the sources alone does not copy them again (they come before the project's wheel).
        """
        try:
            return {CONTAINER_LIBS: self.distribution.libs}
        except PeerStartError:
            return {}

    def new_broker(self, run_dir: Path, *, port: int, properties: Mapping[str, str | int],
                   startup_timeout: float, stop_timeout: float,
                   wrap: Wrap | None = None) -> ApacheKafkaBroker:
        cls: type[ApacheKafkaBroker] = wrap(ApacheKafkaBroker) if wrap else ApacheKafkaBroker
        return cls(run_dir, port=port, properties=properties, distribution=self.distribution,
                   startup_timeout=startup_timeout, stop_timeout=stop_timeout)

