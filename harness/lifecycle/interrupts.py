"""One way for a long command to be interrupted: the first SIGINT or SIGTERM, once.

``run`` and ``matrix`` start processes in sessions of their own (so the terminal's Ctrl-C does
not kill them in arbitrary order), which means a signal reaches only the command itself. Raised
as KeyboardInterrupt, the first signal unwinds the command through every ``finally`` that stops
what it started; a second signal while that happens is ignored, because cutting the cleanup
short is what would leave processes behind. SIGTERM (a cancelled CI job, ``timeout``) is treated
as Ctrl-C. Main thread only: Python delivers signals there.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def interrupt_once() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def interrupt(signum: int, _frame: object) -> None:
        if received:
            return  # already stopping: a second signal must not cut the cleanup short
        received.append(signum)
        raise KeyboardInterrupt

    previous = {signum: signal.signal(signum, interrupt)
                for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
