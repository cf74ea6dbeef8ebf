"""What tests ask /proc about the harness's own processes, and how they start a Python child
that a test interrupts."""

from __future__ import annotations

import sys
from pathlib import Path

# Python leaves SIGINT ignored in a process that inherits it ignored, and a command started in
# the background by a non-interactive shell (`cmd &`, as a CI job may be) inherits exactly that:
# every pytest worker, and each child it starts, then ignores a Ctrl-C. Whether a worker had
# put a handler of its own in place by then (PySpark's, once a test started a Spark session)
# decided whether such a child could be interrupted at all.
_INTERRUPTIBLE = "import signal\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"


def interruptible_python(script: str, *args: str) -> list[str]:
    """The command line of a Python child running `script` with `args`, in which SIGINT raises
    KeyboardInterrupt as it does in a terminal, whatever this process inherited."""
    return [sys.executable, "-c", _INTERRUPTIBLE + script, *args]


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
