"""What /proc says about a process, for code that must tell one process from a later one with
the same pid (the reaper's ledger, the supervisors' cards, a docker run's owner label).

Its own module, below everything else in the harness, so that any layer can ask without
importing the reaper (which itself reaches into the cluster layer to undo docker runs).
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
