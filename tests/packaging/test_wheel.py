"""The harness as a user installs it: the wheel in a fresh virtualenv, no checkout in sight.

The wheel must carry the suites (as the package ``kafka_harness_suites``), the pytest plugin
and every runtime dependency, so a user's own directory can run
``pytest --pyargs kafka_harness_suites.protocol --kafka-bootstrap-server H:P`` against their
broker.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cluster.targets import Target

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "harness", "reference_broker",
           "suites")


def _run(command: list[str], cwd: Path, timeout: float = 600) -> str:
    # A clean environment: nothing from this checkout's virtualenv or PYTHONPATH leaks in.
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env)
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}:\n" \
                                 f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh virtualenv, outside the checkout, with only the built wheel installed in it."""
    where = tmp_path_factory.mktemp("wheel")
    # Built from a copy of what the distribution is made of, so the build leaves nothing in
    # the checkout and cannot pick up anything else from it.
    source = where / "source"
    source.mkdir()
    for name in SOURCES:
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
        copy(ROOT / name, source / name,
             **({"ignore": shutil.ignore_patterns("__pycache__")} if copy is shutil.copytree
                else {}))
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(where / "dist"),
          str(source)], cwd=where)
    (wheel,) = (where / "dist").glob("kafka_harness-*.whl")
    environment = where / "venv"
    venv.create(environment, with_pip=True)
    _run([str(environment / "bin" / "pip"), "install", "-q", str(wheel)], cwd=where)
    yield environment


def test_the_wheel_holds_the_suites_the_plugin_and_the_runtime(installed: Path,
                                                               tmp_path: Path):
    python = str(installed / "bin" / "python")
    shown = _run([python, "-c", "import harness, kafka_harness_suites, pytest, docker; "
                  "print(harness.__file__); print(kafka_harness_suites.__file__)"],
                 cwd=tmp_path)
    for path in shown.split():
        assert Path(path).is_relative_to(installed), f"{path} is not from the wheel"
    plugins = _run([python, "-m", "pytest", "--help"], cwd=tmp_path)
    assert "--kafka-bootstrap-server" in plugins
    # The checker's passes ship as the Java they are built from, where jvm_passes looks.
    sources = _run([python, "-c", "from harness.checker import jvm_passes; "
                    "print(*sorted(p.name for p in jvm_passes.SOURCES.glob('*.java')))"],
                   cwd=tmp_path).split()
    assert sources == sorted(p.name for p in (ROOT / "harness/checker/jvm").glob("*.java"))


def test_the_protocol_suite_runs_from_the_wheel_against_a_broker(
        installed: Path, users_broker: Target, tmp_path: Path):
    out = _run([str(installed / "bin" / "python"), "-m", "pytest", "--pyargs",
                "kafka_harness_suites.protocol", "-q", "-p", "no:cacheprovider",
                "--kafka-bootstrap-server", users_broker.bootstrap], cwd=tmp_path)
    counts = dict((kind, int(n)) for n, kind in re.findall(r"(\d+) (passed|failed|error)", out))
    assert counts.get("passed", 0) >= 50 and "failed" not in counts and "error" not in counts, \
        out[-2000:]
