"""One client process's history: rows as HISTORY.md says, safe against the process being killed.

A client may die at any moment — the nemesis or a test kills it with SIGKILL — and the rows it
wrote until then are exactly the evidence the checker needs (a consumer that committed and died
before processing). So rows go first to a line-per-row journal, flushed as they are written, and
only a clean close turns the journal into the process's Parquet file. Whoever started the process
calls :func:`salvage` after it ended: a journal left behind is converted, minus a torn last line.

Journals are hidden files (``.process-0007.journal``): the checker reads only ``*.parquet`` and
``*.jsonl``, so a history directory never shows it a half-written file.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.history import COLUMN_NAMES, Event, write_parquet

# Op ids carry the process number in the high bits, so processes never share one.
OP_BITS = 32


def process_name(process: int) -> str:
    return f"process-{process:04d}"


def parquet_path(history_dir: Path, process: int) -> Path:
    return history_dir / f"{process_name(process)}.parquet"


def journal_path(history_dir: Path, process: int) -> Path:
    return history_dir / f".{process_name(process)}.journal"


class Recorder:
    """Writes one logical process's rows: seq and op numbering, times from the run's start."""

    def __init__(self, history_dir: Path | str, run_id: str, process: int, run_start_ns: int):
        if not 0 <= process < 2**(63 - OP_BITS):
            raise ValueError(f"process number {process} out of range")
        self.history_dir = Path(history_dir)
        self.run_id = run_id
        self.process = process
        self.run_start_ns = run_start_ns
        self._seq = 0
        self._ops = 0
        self._journal = journal_path(self.history_dir, process).open("w", encoding="utf-8")

    def now_ns(self) -> int:
        """Nanoseconds since the run started, on the host's monotonic clock (shared by all
        processes on one machine, unlike the wall clock it does not jump)."""
        return time.monotonic_ns() - self.run_start_ns

    def next_op(self) -> int:
        self._ops += 1
        return (self.process << OP_BITS) | self._ops

    def record(self, type: str, f: str, op: int, *, time_ns: int | None = None,
               **fields: Any) -> Event:
        """Append one row; ``fields`` are the optional columns (topic, partition, offset, ...)."""
        self._seq += 1
        event = Event(
            run_id=self.run_id,
            process=self.process,
            seq=self._seq,
            op=op,
            time_ns=self.now_ns() if time_ns is None else time_ns,
            type=type,
            f=f,
            **fields,
        )
        self._journal.write(json.dumps(event.as_dict(), separators=(",", ":")) + "\n")
        self._journal.flush()
        return event

    def close(self) -> Path:
        """Turn the journal into the process's Parquet file; returns its path."""
        self._journal.close()
        return salvage_one(self.history_dir, self.process)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *_: object) -> None:
        if not self._journal.closed:
            self.close()


def _journal_events(path: Path) -> Iterator[Event]:
    """The journal's complete rows, one at a time: a crashed client's journal holds every row
    of its life, and reading it whole grew the harness by ~80 MB for a 20-minute consumer in
    a soak (docs/soak.md); the Parquet writer takes them in bounded row groups."""
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if not line.endswith("\n"):
                break  # torn by a kill mid-write
            row = json.loads(line)
            yield Event(**{name: row[name] for name in COLUMN_NAMES})


# Salvage runs inside the harness while the workload goes on, so it holds few rows at a time:
# with the writer's default of 65,536 each salvage still raised the harness's high-water mark
# by ~5-7 MiB, which CPython keeps (the second soak's harness: 180 -> 200 MiB over 27 min).
SALVAGE_ROW_GROUP = 8192


def salvage_one(history_dir: Path, process: int) -> Path:
    """Convert one process's journal (complete lines only) into its Parquet file."""
    journal = journal_path(history_dir, process)
    target = parquet_path(history_dir, process)
    write_parquet(target, _journal_events(journal), row_group_size=SALVAGE_ROW_GROUP)
    os.unlink(journal)
    return target


def salvage_process(history_dir: Path | str, process: int) -> Path | None:
    """Convert the journal of one process that may have died; None if it closed cleanly."""
    root = Path(history_dir)
    return salvage_one(root, process) if journal_path(root, process).exists() else None


def salvage(history_dir: Path | str) -> list[Path]:
    """Convert every journal a dead process left in ``history_dir``; returns the files made."""
    root = Path(history_dir)
    made = []
    for journal in sorted(root.glob(".process-*.journal")):
        process = int(journal.name.removeprefix(".process-").removesuffix(".journal"))
        made.append(salvage_one(root, process))
    return made
