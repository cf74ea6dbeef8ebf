"""Which supervisors of this user are running, wherever their run directories are.

A run directory can be anywhere (``--dir``, ``$KAFKA_HARNESS_DIR``), so ``kafka-harness down
--all`` cannot find clusters by looking in one place. Each supervisor therefore leaves a card
here while it runs — its pid, its start time and its run directory, one small JSON file in a
directory of this user's — and removes it when it stops. A card whose process is gone (a
SIGKILLed supervisor: its watchdog reaps what it started) or whose pid now names another
process (the start time differs) is stale: :func:`live` ignores it and deletes it.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.lifecycle.procfs import process_start_time


@dataclass(frozen=True)
class Card:
    """One running supervisor: who it is and which run directory it serves."""

    pid: int
    start_time: str
    run_dir: Path


def registry_dir() -> Path:
    """This user's directory of cards (per uid: another user's supervisors are not ours)."""
    return Path(tempfile.gettempdir()) / f"kafka-harness-supervisors-{os.getuid()}"


def register(run_dir: Path) -> Path:
    """Leave this process's card for ``run_dir``; returns its path for :func:`unregister`."""
    pid = os.getpid()
    start_time = process_start_time(pid)
    assert start_time is not None  # this process exists
    directory = registry_dir()
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / f"{pid}-{start_time}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pid": pid, "start_time": start_time,
                               "run_dir": str(run_dir.resolve())}))
    os.replace(tmp, path)
    return path


def unregister(path: Path) -> None:
    path.unlink(missing_ok=True)


def live() -> list[Card]:
    """The cards of supervisors that still run, oldest pid first; stale cards are deleted."""
    cards = []
    for path in sorted(registry_dir().glob("*.json")):
        try:
            record = json.loads(path.read_text())
            card = Card(int(record["pid"]), str(record["start_time"]), Path(record["run_dir"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # being written, or not a card
        if process_start_time(card.pid) == card.start_time:
            cards.append(card)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
    return sorted(cards, key=lambda card: card.pid)
