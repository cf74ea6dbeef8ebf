"""The Spark session the checker runs on: started once per process and shared.

Kept apart from the engine (harness.checker.spark) because starting, sharing and stopping a JVM
is a concern of its own, and every caller that judges a history needs it before any rule runs.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from contextlib import suppress

from py4j.java_gateway import JavaClass
from py4j.protocol import Py4JError
from pyspark import SparkContext
from pyspark.errors import PySparkException
from pyspark.find_spark_home import _find_spark_home
from pyspark.sql import SparkSession

from harness.checker import cluster, jvm_passes
from harness.checker.cluster import SparkError


def start_session(master: str | None = None, history_bytes: int | None = None) -> SparkSession:
    """A session on the master cluster.resolve picks, set up by cluster.session_settings for
    histories of about `history_bytes` (unknown: tuned for big ones)."""
    target = cluster.resolve(master)
    problem = cluster.unreachable(target)
    if problem:
        raise SparkError(problem)
    builder = SparkSession.builder.appName("kafka-harness check")
    if target.connect:
        builder = builder.remote(target.url)
    else:
        builder = builder.master(target.url)
        for key, value in cluster.session_settings(target, history_bytes).items():
            builder = builder.config(key, value)
        # Python workers (they decode JSONL) run what PYSPARK_PYTHON names, else whatever
        # "python3" is on PATH, which may lack this package; default to this interpreter.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        # Unset, spark-submit starts a Python interpreter to find it before starting Java.
        os.environ.setdefault("SPARK_HOME", _find_spark_home())
        for key, value in _passes_settings(target).items():
            builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # a missing or broken Java, or Connect's gRPC, raise many types
        raise SparkError(f"cannot start Spark ({target.url}): {exc}") from exc
    if not target.connect:
        spark.sparkContext.setLogLevel("OFF")
        _found_passes(spark)
    return spark


# Why the last classic session started without the checker's compiled passes (None: built and
# put on its class path): a check on a session without them judges with the SQL rules, the same
# verdicts at about twice the CPU (docs/benchmarks.md).
passes_missing: str | None = None


def _passes_settings(target: cluster.Target) -> dict[str, str]:
    """The checker passes' jar (jvm_passes) on the driver's class path, and shipped to the
    executors of a cluster (a local master's run in the driver). Empty, with passes_missing
    set, when it cannot be built."""
    global passes_missing
    try:
        built = str(jvm_passes.jar(os.environ["SPARK_HOME"]))
    except jvm_passes.BuildError as exc:
        passes_missing = str(exc)
        return {}
    passes_missing = None
    settings = {"spark.driver.extraClassPath": built}
    if not target.local:
        settings["spark.jars"] = built
    return settings


def jvm_class(spark: SparkSession, name: str) -> JavaClass | None:
    """The class `name` in a classic session's JVM, or None if its class path has no such
    class (py4j answers an unknown name with a package, not an error)."""
    found = spark.sparkContext._jvm
    for part in name.split("."):
        found = getattr(found, part)
    return found if isinstance(found, JavaClass) else None


def _found_passes(spark: SparkSession) -> None:
    """Set passes_missing if the JVM lacks the passes although their jar was built: a class
    path is fixed when the JVM starts, and a --driver-class-path in PYSPARK_SUBMIT_ARGS, or a
    session this process started before, replaces the one asked for here."""
    global passes_missing
    if passes_missing is None and jvm_class(spark, jvm_passes.ENTRY) is None:
        passes_missing = (
            "the Spark JVM started without the checker passes' jar on its class path (a "
            "--driver-class-path in PYSPARK_SUBMIT_ARGS, or a session started earlier in this "
            "process, sets a class path of its own); the check uses the SQL rules"
        )


_shared: dict[str, SparkSession] = {}
_shared_lock = threading.Lock()


def _stopped(spark: SparkSession) -> bool:
    """Whether the session can no longer serve: stopped, or its JVM gone (killed, or ended by
    a fatal error in a task: in local mode the driver runs the tasks, and Spark exits on an
    OutOfMemoryError). A dead JVM is forgotten too, so that the next session starts a new one
    instead of calling a gateway nobody answers."""
    if is_connect(spark):
        return bool(getattr(spark, "is_stopped", False))
    context = spark.sparkContext
    if context._jsc is None:
        return True
    process = getattr(SparkContext._gateway, "proc", None)
    try:
        if process is not None and process.poll() is not None:
            raise ConnectionError(f"the Spark JVM exited with {process.returncode}")
        return bool(context._jsc.sc().isStopped())
    except (Py4JError, OSError):
        _forget_jvm()
        return True


def _forget_jvm() -> None:
    """Drop pyspark's handles on a JVM that is gone, so that getOrCreate launches another;
    what this process still holds of it (the pipe the JVM watched, the gateway's sockets) is
    closed first."""
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    if gateway is not None:
        with suppress(Py4JError, OSError):
            gateway.shutdown()
    if process is not None:
        with suppress(OSError):
            process.stdin.close()
        process.poll()
    with SparkContext._lock:
        SparkContext._gateway = None
        SparkContext._jvm = None
        SparkContext._active_spark_context = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None


def shared_session(master: str | None = None, history_bytes: int | None = None) -> SparkSession:
    """The process's one session on `master`, started on first use and stopped at exit.

    A JVM and its SparkContext cost seconds to start and a check of a short run's history a
    fraction of that, so every check in a process (a pytest session's judged runs, a whole
    `kafka-harness run`, the CLI) shares one. Its start-up settings are those of the first
    caller, and a local session serves every local master (local[2] and local[*] alike: a
    pytest session's checker tests and its chaos runs must not stop each other's); asking for
    another cluster stops this one first (a JVM holds one SparkContext). A session that can no
    longer serve (its JVM died) is replaced, so one lost JVM fails one check, not every check
    after it in a long-lived process."""
    target = cluster.resolve(master)
    url = "local" if target.local else target.url
    with _shared_lock:
        for other in [u for u, s in _shared.items() if u != url or _stopped(s)]:
            with suppress(Py4JError, PySparkException, OSError):
                _shared.pop(other).stop()
        if url not in _shared:
            _shared[url] = start_session(master, history_bytes)
        return _shared[url]


@atexit.register
def stop_shared() -> None:
    """Stop the shared session, if one was started; run at exit too."""
    with _shared_lock:
        for url in list(_shared):
            with suppress(Py4JError, PySparkException, OSError):
                _shared.pop(url).stop()


def is_connect(spark: SparkSession) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")
