"""What every client process is told about the run it belongs to: plain data, sent as JSON.

Clients run in their own OS processes (a crash or a kill must take only that client), so what
they share — the history directory, the run id, the moment the run started and when it ends —
travels as a small JSON document on their command line.

The end can move after the clients started: a nemesis heal that restarts a broker under load
takes longer than planned, and a workload whose end was fixed on the command line stopped
before the schedule's later faults came. When ``end_file`` is set, the runner keeps the run's
end there (:func:`write_end`, atomically) and :meth:`RunContext.remaining_s` rereads it — at
most every :data:`REREAD_S`, because producers ask in their send loop.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from harness.workload.recorder import Recorder

# librdkafka logs every refused or dropped connection at warning level; under a nemesis that is
# noise in the client logs, and the history records what matters.
QUIET = {"log.connection.close": False}
REREAD_S = 0.25
"""How stale a client's idea of the run's end may be: it reads ``end_file`` again after this, so
it stops at most this long after an end the runner moved closer. A read costs a file open
(about 50 µs on a loaded machine, an ask from the cache under 1 µs); a producer asks on every
send, so the cache keeps the reads to four a second."""


def write_end(path: Path | str, end_ns: int) -> None:
    """Set the run's end (ns after its start) for every client reading ``path``: written to a
    temporary file and renamed over it, so a reader sees the old end or the new, never half."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(str(int(end_ns)))
    os.replace(tmp, target)


def read_end(path: Path | str) -> int | None:
    """The end ``path`` holds, or None if it cannot be read (missing, or not a number)."""
    try:
        return int(Path(path).read_text())
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class RunContext:
    history_dir: str
    run_id: str
    process: int
    run_start_ns: int  # time.monotonic_ns() of the host when the run started
    end_ns: int  # stop when this many ns have passed since the run started (unless end_file)
    # A file the runner keeps the run's end in (write_end); its value wins over end_ns, which
    # stays the end if the file cannot be read.
    end_file: str | None = None

    def __post_init__(self) -> None:
        # Not fields: the reread cache is this process's, and asdict() (the JSON sent to a
        # client) leaves it out.
        object.__setattr__(self, "_end_cache", [self.end_ns, -1])  # [end_ns, next read at]

    def current_end_ns(self) -> int:
        """The run's end (ns after its start) as known now: ``end_file``'s value, reread at
        most every :data:`REREAD_S`, else ``end_ns``."""
        cache: list[int] = self._end_cache  # type: ignore[attr-defined]
        if self.end_file is None:
            return self.end_ns
        now = time.monotonic_ns()
        if now >= cache[1]:
            read = read_end(self.end_file)
            cache[0] = cache[0] if read is None else read
            cache[1] = now + int(REREAD_S * 1e9)
        return cache[0]

    def remaining_s(self) -> float:
        return (self.run_start_ns + self.current_end_ns() - time.monotonic_ns()) / 1e9

    def recorder(self) -> Recorder:
        """This process's recorder: its rows numbered and timed against the run's start."""
        return Recorder(self.history_dir, self.run_id, self.process, self.run_start_ns)

    def with_process(self, process: int) -> RunContext:
        return RunContext(self.history_dir, self.run_id, process, self.run_start_ns, self.end_ns,
                          self.end_file)
