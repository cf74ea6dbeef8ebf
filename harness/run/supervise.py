"""The runner's side of the moving deadline: it keeps the run's end in the file the clients
reread (:func:`harness.workload.context.write_end`) and watches the clients until that end.

The end is computed by :func:`harness.run.deadline.workload_end_s` from what the nemesis has
done; this module only carries it out — writes the file when the end moves, replaces clients
that die, and says on the status line how far the end has moved and why.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from harness.nemesis.executor import Nemesis
from harness.run.deadline import EndPlan, workload_end_s
from harness.workload.context import write_end
from harness.workload.generator import Generator

END_FILE = "workload-end"  # in the run directory: the end, ns after the run's start
_SUPERVISE_S = 0.5


class WorkloadClock:
    """The run's end as the clients see it: ``plan`` decides, the file at ``path`` tells them.
    It is written before the clients start, so none of them reads a missing file."""

    def __init__(self, path: Path, plan: EndPlan) -> None:
        self.path = path
        self.plan = plan
        self.end_s = -1.0
        self.write(plan.cap_s)  # until the schedule runs: no client ends before it is done

    def write(self, end_s: float) -> None:
        if end_s != self.end_s:
            write_end(self.path, int(end_s * 1e9))
            self.end_s = end_s

    def update(self, schedule_done_s: float | None) -> float:
        """Move the end to what the plan says now; returns it (seconds after the start)."""
        self.write(workload_end_s(self.plan, schedule_done_s))
        return self.end_s


def status_text(now_s: float, plan: EndPlan, end_s: float, clients: int,
                nemesis: str) -> str:
    """The status line: the workload's time against its planned end, and why it goes on past
    it while the schedule still has steps to do."""
    planned = plan.planned_end_s
    if now_s <= planned:
        where = f"{now_s:5.1f}/{planned:.0f} s"
    elif end_s >= plan.cap_s:
        where = (f"{now_s:5.1f}/{planned:.0f} s, +{now_s - planned:.1f} s waiting for the "
                 f"schedule (cap {plan.cap_s:.0f} s)")
    else:
        where = f"{now_s:5.1f}/{end_s:.0f} s, extended {end_s - planned:.1f} s after a late heal"
    return f"Workload {where} — {clients} clients — nemesis: {nemesis}"


def supervise(generator: Generator, nemesis: Nemesis, clock: WorkloadClock,
              show: Callable[[str], None]) -> None:
    """Until the workload's end (moved as the nemesis goes): replace clients that die, keep the
    end file current, show where the run is."""
    start_ns = generator.context.run_start_ns
    while True:
        end_s = clock.update(nemesis.schedule_done_s)
        now_s = (time.monotonic_ns() - start_ns) / 1e9
        if now_s >= end_s:
            return
        generator.check()
        last = nemesis.done[-1]["what"] if nemesis.done else "quiet"
        show(status_text(now_s, clock.plan, end_s, len(generator.running), last))
        time.sleep(min(_SUPERVISE_S, end_s - now_s))
