"""Shared fixtures: one local Spark session for every in-process Spark test, and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CLI = str(Path(sys.executable).with_name("kafka-harness"))


@pytest.fixture
def spark() -> Any:
    """The process's shared session (started once: a JVM costs seconds, a check on a tiny
    history a fraction of that); the CLI run in-process and judged runs use the same one.
    Asked for anew by each test, so that a session replaced after its JVM died serves the
    tests after it."""
    from harness.checker import spark_session

    return spark_session.shared_session("local[2]", history_bytes=0)


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        lines = self.stdout.strip().splitlines()
        assert len(lines) == 1, f"--json must print exactly one line, got {self.stdout!r}"
        return json.loads(lines[0])


@pytest.fixture
def check_here(spark: Any, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
               ) -> Callable[..., Run]:
    """`kafka-harness check ARGS` run in this process by the program's own entry point (the
    same options, exit code and two streams) on the shared Spark session, the default master
    pointed at it and ``--engine spark`` given (``auto`` would judge these small histories
    with Python): what a user's run does, less the JVM start the run_cli tests pay."""
    from harness.cli import main

    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    monkeypatch.setenv("SPARK_MASTER", "local[2]")

    def check(*args: str) -> Run:
        capfd.readouterr()
        monkeypatch.setattr(sys, "argv", ["kafka-harness", "check", "--engine", "spark", *args])
        with pytest.raises(SystemExit) as done:
            main()
        out, err = capfd.readouterr()
        return Run(int(done.value.code or 0), out, err)

    return check


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 240) -> Run:
    """`kafka-harness` as a user runs it: a subprocess, its exit code and its two streams."""
    merged = {**os.environ, **(env or {})}
    done = subprocess.run(
        [CLI, *args], capture_output=True, text=True, env=merged, timeout=timeout, check=False
    )
    return Run(done.returncode, done.stdout, done.stderr)
