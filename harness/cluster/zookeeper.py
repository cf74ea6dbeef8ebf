"""A real, standalone ZooKeeper server started from Debian's ``zookeeper`` package.

Kafka's ZooKeeper mode is only as faithful as the ZooKeeper under it: session expiry, ephemeral
znodes vanishing, and version-checked writes are the server's behaviour, so the harness runs the
real Java server rather than a fake. The Debian package installs ``/usr/share/java/zookeeper.jar``
whose manifest already names every dependency jar; we add ``slf4j-simple`` so the server's log
goes to stderr, which is redirected to ``<run_dir>/zookeeper.log`` together with anything the
JVM itself prints (a missing main class, a bad config) — one file to read when it fails.

The process runs in its own session, like the brokers in :mod:`harness.cluster.peers`, so a
Ctrl-C reaches only the harness, which then stops it (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.cluster.errors import PeerStartError
from harness.cluster.process import ManagedProcess

DEBIAN_ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
DEBIAN_SLF4J_SIMPLE_JAR = Path("/usr/share/java/slf4j-simple.jar")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# The server's heap, as KAFKA_HEAP_OPTS is Kafka's: a soak sets a fixed, pre-touched heap
# ("-Xms256m -Xmx256m -XX:+AlwaysPreTouch") so that RSS shows growth outside the heap.
HEAP_OPTS_ENV = "ZOOKEEPER_HEAP_OPTS"
DEFAULT_HEAP_OPTS = "-Xms64m -Xmx256m"
CLASSPATH_ENV = "ZOOKEEPER_CLASSPATH"
_INSTALL_HINT = "install Debian's package: apt-get install -y zookeeper (ci/setup.sh does)"
_LOG_TAIL_CHARS = 2000
_CONFIG_NAME = "zoo.cfg"


def default_classpath() -> list[str]:
    """``$ZOOKEEPER_CLASSPATH`` (``:``-separated) if set, else the Debian package's jars."""
    override = os.environ.get(CLASSPATH_ENV)
    if override:
        return [entry for entry in override.split(os.pathsep) if entry]
    return [str(DEBIAN_ZOOKEEPER_JAR), str(DEBIAN_SLF4J_SIMPLE_JAR)]


def find_java(java: str | None = None) -> str:
    """The ``java`` executable: the given path, ``$JAVA_HOME/bin/java``, or ``java`` on PATH."""
    if java is not None:
        candidates = [java]
    else:
        java_home = os.environ.get("JAVA_HOME")
        candidates = [str(Path(java_home) / "bin" / "java")] if java_home else []
        candidates.append("java")
    for candidate in candidates:
        found = shutil.which(candidate)
        if found:
            return found
    raise PeerStartError(
        f"ZooKeeper needs Java, and no executable was found (tried {', '.join(candidates)}): "
        "install a JRE, e.g. apt-get install -y openjdk-17-jre-headless"
    )


def four_letter_word(host: str, port: int, word: str, timeout: float = 1.0) -> str:
    """Send one of ZooKeeper's four-letter commands and return its whole answer.

    The server answers and closes the connection, so reading to EOF is the framing.
    """
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode("ascii"))
        chunks: list[bytes] = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


class ZooKeeperServer(ManagedProcess):
    """One standalone ZooKeeper on a free loopback port, in a run directory.

    ``tick_time_ms`` is small by default so tests can use short session timeouts: ZooKeeper
    clamps a client's requested timeout to ``[2, 20] × tickTime`` unless the bounds are set,
    so both bounds are written explicitly (``min_session_timeout_ms`` and
    ``max_session_timeout_ms``) to allow Kafka's 18 s default as well as sub-second ones.

    Without a ``run_dir`` a temporary one is created and removed on ``stop``; a given one is
    kept (data and log survive), and a stopped server restarts on the same port with its data.
    """

    name = "zookeeper"

    def __init__(
        self,
        run_dir: Path | str | None = None,
        *,
        port: int | None = None,
        tick_time_ms: int = 200,
        min_session_timeout_ms: int | None = None,
        max_session_timeout_ms: int = 60_000,
        java: str | None = None,
        classpath: Sequence[str] | None = None,
        extra_config: Mapping[str, str | int] | None = None,
        startup_timeout: float = 30.0,
        stop_timeout: float = 10.0,
    ) -> None:
        super().__init__(run_dir, port=port, startup_timeout=startup_timeout,
                         stop_timeout=stop_timeout)
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = min_session_timeout_ms or 2 * tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.java = java
        self.classpath = list(classpath) if classpath is not None else None
        self.extra_config = dict(extra_config or {})

    @property
    def connect_string(self) -> str:
        """``host:port`` for ``zookeeper.connect`` or kazoo's ``hosts``."""
        if self.port is None:
            raise RuntimeError(f"{self.name} has not been started")
        return f"{self.host}:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.run_dir / _CONFIG_NAME

    @property
    def data_dir(self) -> Path:
        return self.run_dir / "data"

    def config(self) -> dict[str, str]:
        """The ``zoo.cfg`` entries, ``extra_config`` last so a caller can override any of them."""
        merged: dict[str, str | int] = {
            "tickTime": self.tick_time_ms,
            "dataDir": str(self.data_dir),
            "clientPort": self.port if self.port is not None else 0,
            "clientPortAddress": self.host,
            "minSessionTimeout": self.min_session_timeout_ms,
            "maxSessionTimeout": self.max_session_timeout_ms,
            # Every broker, proxy and test client connects from 127.0.0.1: no per-IP cap.
            "maxClientCnxns": 0,
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "ruok,srvr,stat,mntr,cons",
            **self.extra_config,
        }
        return {key: str(value) for key, value in merged.items()}

    def _command(self) -> list[str]:
        """The JVM command line; raises :class:`PeerStartError` if Java or a jar is missing."""
        classpath = self.classpath if self.classpath is not None else default_classpath()
        missing = [entry for entry in classpath if not Path(entry).exists()]
        if missing:
            raise PeerStartError(
                f"ZooKeeper class path entries do not exist: {', '.join(missing)}; "
                f"{_INSTALL_HINT}, or set ${CLASSPATH_ENV}"
            )
        return [
            find_java(self.java),
            *os.environ.get(HEAP_OPTS_ENV, DEFAULT_HEAP_OPTS).split(),
            "-XX:+UseSerialGC",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSS",
            # ZooKeeper would otherwise try to register log4j MBeans it has no jar for.
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp",
            os.pathsep.join(classpath),
            MAIN_CLASS,
            # Relative to the process's working directory, the run directory.
            f"./{_CONFIG_NAME}",
        ]

    def _prepare(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lines = [f"{key}={value}" for key, value in self.config().items()]
        tmp = self.config_path.with_suffix(".tmp")
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, self.config_path)

    def _wait_until_serving(self) -> None:
        """Poll ``srvr`` until it reports a mode, or fail as soon as the JVM exits.

        ``ruok`` is not enough: it answers ``imok`` while the server still refuses requests.
        """
        port = self.port
        if port is None:  # start() picks a port before it waits
            raise RuntimeError(f"{self.name} has no port to wait on")
        deadline = time.monotonic() + self.startup_timeout
        last_error = "nothing listening"
        while time.monotonic() < deadline:
            if not self.is_running():
                raise PeerStartError(f"process exited before {self.connect_string} answered")
            try:
                answer = four_letter_word(self.host, port, "srvr", timeout=0.5)
            except OSError as exc:
                last_error = str(exc) or type(exc).__name__
            else:
                if "Mode: " in answer:
                    return
                last_error = f"srvr answered {answer.strip()!r}"
            time.sleep(0.05)
        raise PeerStartError(
            f"{self.connect_string} did not serve within {self.startup_timeout:.0f}s: "
            f"{last_error}"
        )
