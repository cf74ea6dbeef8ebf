"""What /proc says about a process: whether it runs, is paused or is gone, and which process
a pid names (its start time), for code that must tell one process from a later one with the same
pid (the reaper's ledger, the supervisors' cards, a docker run's owner label).

Reads only /proc, so any layer may ask — the CLI waiting for a supervisor to stop, the
supervisor describing its nodes — without loading what started the process.
"""

from __future__ import annotations

import os
from pathlib import Path


def process_start_time(pid: int) -> str | None:
    """Field 22 of /proc/PID/stat (clock ticks since boot), or None when there is no such
    process: with the pid, it names one process even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


def processes_with_environment(entries: set[bytes]) -> list[int]:
    """The pids (this process left out) whose environment holds one of ``entries``
    (``b"NAME=value"``); processes gone or not ours to read are skipped."""
    if not entries:
        return []
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                environment = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if entries.intersection(environment):
                found.append(int(entry.name))
    return found


def process_state(pid: int | None) -> str:
    """``running``, ``paused`` (SIGSTOPped) or ``down`` (gone or a zombie), from /proc."""
    if pid is None:
        return "down"
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return "down"
    state = stat.rsplit(")", 1)[1].split()[0]
    return {"T": "paused", "t": "paused", "Z": "down", "X": "down"}.get(state, "running")
