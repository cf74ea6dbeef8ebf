"""What every client process is told about the run it belongs to: plain data, sent as JSON.

Clients run in their own OS processes (a crash or a kill must take only that client), so what
they share — the history directory, the run id, the moment the run started and when it ends —
travels as a small JSON document on their command line.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from harness.workload.recorder import Recorder

# librdkafka logs every refused or dropped connection at warning level; under a nemesis that is
# noise in the client logs, and the history records what matters.
QUIET = {"log.connection.close": False}


@dataclass(frozen=True)
class RunContext:
    history_dir: str
    run_id: str
    process: int
    run_start_ns: int  # time.monotonic_ns() of the host when the run started
    end_ns: int  # stop when this many ns have passed since the run started

    def remaining_s(self) -> float:
        return (self.run_start_ns + self.end_ns - time.monotonic_ns()) / 1e9

    def recorder(self) -> Recorder:
        """This process's recorder: its rows numbered and timed against the run's start."""
        return Recorder(self.history_dir, self.run_id, self.process, self.run_start_ns)

    def with_process(self, process: int) -> RunContext:
        return RunContext(self.history_dir, self.run_id, process, self.run_start_ns, self.end_ns)
