"""What the broker does when a log dir's disk fails (Kafka's LogDirFailureChannel).

Apache Kafka wraps every I/O call on a log dir so that an IOException marks the dir offline:
``ReplicaManager.handleLogDirFailure`` stops fetching into its partitions and takes them
offline, and ``LogManager.handleLogDirFailure``, once no log dir is left alive, logs "Shutdown
broker because all log dirs in ... have failed" and halts the process with exit code 1 — no
controlled shutdown, no further write. The controller then learns of the dead broker from its
expired ZooKeeper session and moves leadership to the ISR. The request that hit the error gets
no acknowledgement: the write it carried was not persisted, so the producer must not believe it.

The reference broker does the same from the few places its errors surface — a request, the
replica fetcher, a periodic log task — instead of wrapping every call: each hands its exception
to :func:`handle`, which halts on a storage error (the disk is full, fails, or went read-only)
and returns False for any other, which the caller then treats as before. One difference, stated:
with several log dirs Kafka keeps serving the healthy ones; the reference broker, which cannot
take a single dir's partitions offline, halts as soon as any dir fails, which keeps Kafka's
promise (nothing unpersisted is acknowledged) at the cost of availability.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

log = logging.getLogger("reference_broker.log")

STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EROFS})
"""errno values that mean the disk under a log dir failed; no socket error has any of them."""

HALT_EXIT_CODE = 1  # Kafka's Exit.halt(1)


def storage_error(exc: BaseException | None) -> OSError | None:
    """The OSError with a storage errno in ``exc``'s chain (cause or context), if any."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def _halt(code: int) -> NoReturn:
    for handler in logging.getLogger().handlers:
        handler.flush()
    os._exit(code)


class LogDirFailureChannel:
    """The broker's log dirs and what to do when one fails: halt (see the module doc)."""

    def __init__(self, log_dirs: Sequence[Path | str],
                 halt: Callable[[int], NoReturn] = _halt) -> None:
        self.log_dirs = [str(d) for d in log_dirs]
        self._halt = halt

    def _dir_of(self, error: OSError) -> str | None:
        for name in (error.filename, error.filename2):
            if name is not None:
                path = Path(os.fsdecode(name)).resolve()
                for log_dir in self.log_dirs:
                    if path == Path(log_dir).resolve() or Path(log_dir).resolve() in path.parents:
                        return log_dir
        return self.log_dirs[0] if len(self.log_dirs) == 1 else None

    def handle(self, exc: BaseException, what: str) -> bool:
        """Halt if ``exc`` is a storage error (never returns then); False otherwise."""
        error = storage_error(exc)
        if error is None:
            return False
        failed = self._dir_of(error)
        where = f"dir {failed}" if failed is not None else "a log dir"
        log.error("Error while %s in %s: %s", what, where, error)
        log.warning("Stopping serving logs in %s", where)
        log.critical("Shutdown broker because all log dirs in %s have failed",
                     ", ".join(self.log_dirs))
        self._halt(HALT_EXIT_CODE)


_CHANNEL: LogDirFailureChannel | None = None


def install(channel: LogDirFailureChannel | None) -> None:
    """Make ``channel`` the one :func:`handle` reports to (the server does, at start-up)."""
    global _CHANNEL
    _CHANNEL = channel


def handle(exc: BaseException, what: str) -> bool:
    """Report ``exc`` to the installed channel: halts on a storage error, else False. Without
    a channel (a log used outside a server) nothing halts."""
    return _CHANNEL.handle(exc, what) if _CHANNEL is not None else False
