"""Where and how the Spark checker runs, decided without importing pyspark.

Kept apart from harness.checker.spark so the choices (which master, which settings for which
history size, what executors need shipped) read as plain data and can be tested without a JVM.
"""

from __future__ import annotations

import os
import socket
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import harness


class SparkError(RuntimeError):
    """Spark or Java could not start, the cluster asked for cannot be reached, or a job failed:
    the infrastructure, not the history, is at fault."""


SMALL_HISTORY = 1 << 20  # bytes of history files below which a check is tuned for latency
# Spark's own logging is off (stderr belongs to the CLI), save the one line that says why a JVM
# ended itself: a fatal error in a task (an OutOfMemoryError) exits the local driver.
_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = spark: %p %c{1}: %m%n%ex
logger.quiet.name = org.apache.spark
logger.quiet.level = off
logger.fatal.name = org.apache.spark.util.SparkUncaughtExceptionHandler
logger.fatal.level = error
"""


@dataclass(frozen=True)
class Target:
    url: str
    connect: bool  # Spark Connect (sc://) rather than a classic master

    @property
    def local(self) -> bool:
        return self.url.startswith("local")


def resolve(master: str | None) -> Target:
    """`--master` wins, then $SPARK_REMOTE (Spark Connect), then $SPARK_MASTER, then local[*]."""
    if master:
        return Target(master, master.startswith("sc://"))
    if os.environ.get("SPARK_REMOTE"):
        return Target(os.environ["SPARK_REMOTE"], True)
    return Target(os.environ.get("SPARK_MASTER") or "local[*]", False)


def unreachable(target: Target) -> str | None:
    """Why a remote master or Connect server cannot be used, found in seconds rather than
    after Spark's own minute of retries; None when it answers or is local."""
    if target.local or not target.url.startswith(("spark://", "sc://")):
        return None
    default_port = 15002 if target.connect else 7077
    for endpoint in urlsplit(target.url).netloc.split("@")[-1].split(","):
        host, _, port = endpoint.partition(":")
        try:
            socket.create_connection((host, int(port or default_port)), timeout=3).close()
            return None
        except (OSError, ValueError):
            continue
    kind = "Spark Connect server" if target.connect else "Spark master"
    return f"cannot reach {kind} {target.url}"


def session_settings(target: Target, history_bytes: int | None = None) -> dict[str, str]:
    """Settings fixed at start-up: fast to start, quiet (stdout belongs to the CLI), and bound
    to loopback when everything runs here. For a small history the JVM is set up for a short
    life: the JIT stops at its quick first tier (which halves a cold check and costs nothing on
    so little data), one serial collector instead of G1's threads and regions, no perf-data
    file; and the first job already runs as job_settings runs a small check (no code
    generation, no adaptive re-planning, one shuffle partition)."""
    log4j = Path(tempfile.gettempdir()) / "kafka-harness-log4j2.properties"
    log4j.write_text(_LOG4J)
    java = f"-Dlog4j2.configurationFile={log4j}"
    small = history_bytes is not None and history_bytes < SMALL_HISTORY
    if small:
        java += " -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UsePerfData"
    settings = {
        # PySpark 4 records the Python call site of every DataFrame call for error messages:
        # four JVM round trips per call, most of a small history's check.
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": os.environ.get("SPARK_DRIVER_MEMORY", "2g"),
        "spark.driver.extraJavaOptions": java,
    }
    if small and not target.connect:
        settings.update(job_settings(0, 1))
    if target.local and not os.environ.get("SPARK_LOCAL_IP"):
        settings["spark.driver.host"] = "127.0.0.1"
        settings["spark.driver.bindAddress"] = "127.0.0.1"
    return settings


def job_settings(history_bytes: int, cores: int) -> dict[str, str]:
    """Settings for one check. A small history costs what planning and compiling each stage
    costs, not its data: one shuffle partition, no code generation, no adaptive re-planning. A
    big one gets about a partition per 32 MiB, as a whole number of waves over the cores (a
    last wave with one task keeps all but one core idle), its files split as many ways, and
    both optimisations."""
    small = history_bytes < SMALL_HISTORY
    waves = -(-history_bytes // (cores * (32 << 20)))
    partitions = 1 if small else min(2000, cores * waves)
    split = max(1 << 20, -(-history_bytes // partitions))
    return {
        "spark.sql.shuffle.partitions": str(partitions),
        "spark.sql.files.maxPartitionBytes": str(split),
        # Partitions are sized for the cores already; merging them after a shuffle leaves
        # fewer tasks than cores, and an aggregation of millions of keys in one task spills.
        "spark.sql.adaptive.coalescePartitions.enabled": "false",
        "spark.sql.adaptive.enabled": str(not small).lower(),
        "spark.sql.codegen.wholeStage": str(not small).lower(),
        "spark.sql.codegen.factoryMode": "NO_CODEGEN" if small else "FALLBACK",
        # The checker shuffles by topic-partition once and joins within it; let joins on
        # (topic, partition, offset) reuse that partitioning instead of shuffling again.
        "spark.sql.requireAllClusterKeysForCoPartition": "false",
    }


def package_archive() -> Path:
    """This package as a zip for executors that lack it (they decode JSONL with it)."""
    archive = Path(tempfile.mkdtemp(prefix="kafka-harness-")) / "harness.zip"
    package = Path(harness.__file__).parent
    with zipfile.ZipFile(archive, "w") as zf:
        for path in package.rglob("*.py"):
            zf.write(path, Path("harness") / path.relative_to(package))
    return archive
