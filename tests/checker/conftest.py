"""Shared fixtures: one local Spark session for every in-process Spark test, and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CLI = str(Path(sys.executable).with_name("kafka-harness"))


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """Started once: a JVM costs seconds, a check on a tiny history a fraction of that."""
    from harness.checker import spark as engine

    session = engine.start_session("local[2]", history_bytes=0)
    yield session
    session.stop()


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        lines = self.stdout.strip().splitlines()
        assert len(lines) == 1, f"--json must print exactly one line, got {self.stdout!r}"
        return json.loads(lines[0])


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 240) -> Run:
    """`kafka-harness` as a user runs it: a subprocess, its exit code and its two streams."""
    merged = {**os.environ, **(env or {})}
    done = subprocess.run(
        [CLI, *args], capture_output=True, text=True, env=merged, timeout=timeout, check=False
    )
    return Run(done.returncode, done.stdout, done.stderr)
