"""The checker's compiled passes (harness/checker/jvm/*.java): built into a jar against the
Spark the session runs, once per source and Spark version.

Why a build at all: the by-topic-partition rules as SQL cost five times a walk of their rows,
and as Java passes about what the walk costs (docs/benchmarks.md). The sources ship in the
wheel and the jar is built here with the JDK's javac, not shipped: a jar compiled against one
Spark's internal row API must be compiled again for another, and the project commits no
binaries. Without a javac (a JRE only), or when the build fails, the engine judges with its
SQL rules instead (BuildError says why; spark_session keeps it for the check to name).

No pyspark import: the Spark engine's session (spark_session) asks for the jar before its JVM
starts, since a class path is fixed at start.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from harness.vendor import vendor_dir

SOURCES = Path(__file__).parent / "jvm"
# The classes the Spark engine calls (spark_jvm), by their Java names: the by-topic-partition
# rules' passes and the by-process rules'.
ENTRY = "harness.checker.jvm.TopicPartitionPass"
PROCESS_ENTRY = "harness.checker.jvm.ProcessPass"
# The oldest Java Spark 4 runs on; the classes must load on it.
RELEASE = "17"


class BuildError(Exception):
    """The passes could not be built; the message says what is missing or what javac said."""


def _javac() -> str:
    home = os.environ.get("JAVA_HOME")
    candidates = [str(Path(home) / "bin" / "javac")] if home else []
    candidates.append(shutil.which("javac") or "")
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise BuildError("no javac (the JDK's compiler) in $JAVA_HOME/bin or on PATH")


def _key(spark_jars: Path) -> str:
    """Changes with any source, with the Spark jars (their names carry their versions) and
    with the release compiled for."""
    digest = hashlib.sha256(RELEASE.encode())
    for source in sorted(SOURCES.glob("*.java")):
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    for jar in sorted(p.name for p in spark_jars.glob("*.jar")):
        digest.update(jar.encode() + b"\0")
    return digest.hexdigest()[:16]


def jar(spark_home: str | os.PathLike[str]) -> Path:
    """The passes' jar for the Spark at `spark_home`, built if this version has none yet.

    Built in a temporary directory and renamed into place, so that two processes building at
    once both end with a whole jar. Raises BuildError when it cannot be built."""
    spark_jars = Path(spark_home) / "jars"
    if not spark_jars.is_dir():
        raise BuildError(f"no Spark jars at {spark_jars}")
    built = vendor_dir() / "checker-jvm" / f"passes-{_key(spark_jars)}.jar"
    if built.is_file():
        return built
    javac = _javac()
    built.parent.mkdir(parents=True, exist_ok=True)
    # Beside the jar, so that the rename into place stays on one file system.
    with tempfile.TemporaryDirectory(prefix="javac-", dir=built.parent) as work:
        classes = Path(work) / "classes"
        done = subprocess.run(
            [javac, "--release", RELEASE, "-nowarn", "-cp", f"{spark_jars}/*", "-d",
             str(classes), *map(str, sorted(SOURCES.glob("*.java")))],
            capture_output=True, text=True, check=False,
        )
        if done.returncode != 0:
            raise BuildError(f"javac failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
        partial = Path(work) / built.name
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        os.replace(partial, built)
    return built
