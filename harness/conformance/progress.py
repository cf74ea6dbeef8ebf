"""Live counts of a suite session while it runs, for `kafka-harness run` and `matrix`.

A target's pytest session can take half an hour; before this, nothing was shown between "running
… against T" and its summary. The session's :mod:`harness.conformance.results` plugin appends
one JSON line per finished test to a progress file (``--suite-progress``); :class:`ProgressFile`
reads the lines added since it last looked, and a :class:`SuiteProgress` shows the counts: a
live line on a terminal (:class:`LiveProgress`), else a line every few tests
(:class:`LineProgress`), which is what a CI log can keep.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from rich.console import Console
from rich.status import Status

OUTCOMES = ("passed", "failed", "error", "skipped")
LINE_EVERY = 10
"""Tests between two lines of :class:`LineProgress`."""


def summary(counts: Counter[str]) -> str:
    """``12 passed, 1 failed, 3 skipped`` (outcomes with a count only)."""
    return ", ".join(f"{counts[o]} {o}" for o in OUTCOMES if counts[o]) or "no test done yet"


class ProgressFile:
    """The outcomes a session appended to its progress file, read a whole line at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.counts: Counter[str] = Counter()
        self._offset = 0

    def read_new(self) -> int:
        """Count the tests finished since the last call; returns how many."""
        try:
            with self.path.open("rb") as file:
                file.seek(self._offset)
                data = file.read()
        except FileNotFoundError:
            return 0
        complete = data[:data.rfind(b"\n") + 1]  # a line being written waits for next time
        self._offset += len(complete)
        lines = [json.loads(line) for line in complete.splitlines() if line.strip()]
        self.counts.update(line["outcome"] for line in lines)
        return len(lines)


class SuiteProgress(Protocol):
    """Shown while one target's session runs."""

    def started(self, target: str, log: Path) -> None: ...

    def update(self, target: str, counts: Counter[str]) -> None: ...

    def finished(self, target: str) -> None: ...


class LineProgress:
    """A line through ``say`` every :data:`LINE_EVERY` finished tests (and the log path first)."""

    def __init__(self, say: Callable[[str], object], every: int = LINE_EVERY) -> None:
        self.say = say
        self.every = every
        self._shown = 0
        self._started = time.monotonic()

    def started(self, target: str, log: Path) -> None:
        self._shown = 0
        self._started = time.monotonic()
        self.say(f"  {target}: log {log}")

    def update(self, target: str, counts: Counter[str]) -> None:
        done = sum(counts.values())
        if done >= self._shown + self.every:
            self._shown = done - done % self.every
            self.say(f"  {target}: {summary(counts)} so far "
                     f"({time.monotonic() - self._started:.0f} s)")

    def finished(self, target: str) -> None:
        """The caller says the final counts itself."""


class LiveProgress:
    """One rich status line on a terminal, rewritten as tests finish."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._status: Status | None = None
        self._started = time.monotonic()

    def started(self, target: str, log: Path) -> None:
        self.console.print(f"  {target}: log {log}", highlight=False)
        self._started = time.monotonic()
        self._status = self.console.status(f"{target}: starting the session…")
        self._status.start()

    def update(self, target: str, counts: Counter[str]) -> None:
        if self._status is not None:
            self._status.update(f"{target}: {summary(counts)} "
                                f"({time.monotonic() - self._started:.0f} s)")

    def finished(self, target: str) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


def for_stderr(say: Callable[[str], object]) -> SuiteProgress:
    """A live line when stderr is a terminal, else lines through ``say``."""
    if sys.stderr.isatty():
        return LiveProgress(Console(stderr=True))
    return LineProgress(say)
