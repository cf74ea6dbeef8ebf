"""What tests ask /proc about the harness's own processes."""

from __future__ import annotations

from pathlib import Path


def watchdog_of(owner: int) -> int | None:
    """The pid of the reaper's watchdog of `owner` (``python -m harness.lifecycle.reaper OWNER
    …``)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"harness.lifecycle.reaper" in argv and str(owner).encode() in argv:
                return int(entry.name)
    return None
