"""Where the reference broker's time goes in one scenario: a standalone reference broker run
under ``perf_profiled_broker.py``, profiled (cProfile, main thread) for exactly the scenario,
and the top functions by own time written next to the benchmark's results."""

from __future__ import annotations

import io
import os
import pstats
import signal
import sys
from pathlib import Path

from harness.cluster.peers import ReferenceBroker
from harness.waiting import wait_for

LAUNCHER = Path(__file__).resolve().with_name("perf_profiled_broker.py")
TOP = 30


class ProfiledReference:
    """A standalone reference broker whose scenarios can be profiled one at a time: ``with
    broker.profiling() as path`` profiles the block, and the ``.prof`` is at ``path`` after."""

    def __init__(self, run_dir: Path) -> None:
        self.out_dir = run_dir / "profiles"
        self.out_dir.mkdir(parents=True, exist_ok=True)
        wrapper = run_dir / "python-profiled"
        wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {LAUNCHER} {self.out_dir} \"$@\"\n")
        wrapper.chmod(0o755)
        self.broker = ReferenceBroker(run_dir / "broker", python=str(wrapper))
        self._count = 0

    def start(self) -> ReferenceBroker:
        self.broker.start()
        return self.broker

    def stop(self) -> None:
        self.broker.stop()

    def begin(self) -> None:
        assert self.broker.pid is not None
        os.kill(self.broker.pid, signal.SIGUSR1)

    def end(self) -> Path:
        """Stop profiling; the profile's path once the broker has written it."""
        assert self.broker.pid is not None
        self._count += 1
        path = self.out_dir / f"{self._count}.prof"
        os.kill(self.broker.pid, signal.SIGUSR2)
        wait_for(lambda: path.exists() and path.stat().st_size > 0, 30,
                 f"the reference broker to write {path}")
        return path


def write_summary(profile: Path, destination: Path, heading: str) -> list[str]:
    """The top functions by own time (pstats' tottime) into ``destination``, after
    ``heading``; returns the top ten lines for the report."""
    stream = io.StringIO()
    stats = pstats.Stats(str(profile), stream=stream)
    stats.strip_dirs().sort_stats(pstats.SortKey.TIME).print_stats(TOP)
    raw = stats.stats  # type: ignore[attr-defined]  # (file, line, name) -> (cc, nc, tt, ct, callers)
    total = sum(entry[2] for entry in raw.values())
    idle = sum(entry[2] for key, entry in raw.items() if "poll' of 'select.epoll" in key[2])
    busy = (f"main thread: {total:.2f} s profiled, {idle:.2f} s of it waiting in epoll "
            f"(idle), {total - idle:.2f} s busy; the busy share of each function is its "
            f"tottime / {total - idle:.2f}")
    text = stream.getvalue()
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_text(f"{heading}\n{busy}\n\n{text}")
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls")), 0)
    return [line for line in lines[start + 1:start + 11] if line.strip()]
