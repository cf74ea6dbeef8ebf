"""When a run's workload ends: the planned duration, moved by the runner while it runs.

A judged run used to fix its clients' end on their command line. When a heal (a broker's
restart under load) took longer than planned, the workload ended before the schedule's later
faults came, and a scenario failed "the schedule was cut short" for a reason that was the
machine's, not the broker's. Now the clients reread the end from a file the runner keeps
(:mod:`harness.workload.context`), and the runner computes it here, as a pure function of the
plan and of what the nemesis has done so far:

* while the schedule has steps to do, the end is the cap — the workload must not stop under a
  fault that is still coming or a heal still under way;
* once the last heal is done, the workload goes on for the planned tail (the planned end minus
  the last planned heal) after it, and never ends before the planned end;
* never past the cap: the planned end plus the planned duration again, at least
  :data:`MIN_EXTENSION_S` — a nemesis step that hangs must not hold the run forever.

Times are seconds after the run's start, in the history's clock. ``shift_s`` is how late the
schedule started (the warm-up gate waited for the consumer group: :mod:`harness.run.warm_up`);
the planned end moves with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from harness.nemesis.schedule import Step

EXTENDED = "the workload was extended"  # how an extension's note begins
NOTED_S = 0.5  # a shorter extension (a network heal's milliseconds) is not worth a note
MIN_EXTENSION_S = 60.0
"""The least a run may be extended by, so a short run (a test's few seconds) still outlasts a
broker's restart under load (29.7 s measured at load average 31, docs/conformance.md)."""


@dataclass(frozen=True)
class EndPlan:
    """What the end is computed from: the planned duration, the tail the schedule leaves after
    its last planned heal, how late the schedule started and how far the end may move."""

    duration_s: float
    tail_s: float
    shift_s: float = 0.0
    extension_cap_s: float = MIN_EXTENSION_S

    @classmethod
    def of(cls, duration_s: float, steps: Sequence[Step], shift_s: float = 0.0,
           extension_cap_s: float | None = None) -> EndPlan:
        """The plan of a run of ``duration_s`` with the (unshifted) schedule ``steps``."""
        last_heal = max((step.heal_at_s for step in steps), default=None)
        tail = duration_s if last_heal is None else max(0.0, duration_s - last_heal)
        cap = (max(duration_s, MIN_EXTENSION_S) if extension_cap_s is None
               else extension_cap_s)
        return cls(duration_s, tail, shift_s, cap)

    @property
    def planned_end_s(self) -> float:
        """The end as planned, the schedule's late start included."""
        return self.duration_s + self.shift_s

    @property
    def cap_s(self) -> float:
        return self.planned_end_s + self.extension_cap_s

    def shifted(self, steps: Sequence[Step]) -> list[Step]:
        """The planned ``steps`` as they run: ``shift_s`` later."""
        return [replace(step, at_s=round(step.at_s + self.shift_s, 3),
                        heal_at_s=round(step.heal_at_s + self.shift_s, 3)) for step in steps]


def workload_end_s(plan: EndPlan, schedule_done_s: float | None) -> float:
    """The workload's end now: ``schedule_done_s`` is when the nemesis finished the last heal of
    its schedule, None while it has steps to do (then the end is the cap)."""
    if schedule_done_s is None:
        return plan.cap_s
    return min(plan.cap_s, max(plan.planned_end_s, schedule_done_s + plan.tail_s))


def extension_note(plan: EndPlan, end_s: float, schedule_done_s: float | None) -> str | None:
    """What a user reads in the run's notes when the end moved past the plan, else None."""
    extended = end_s - plan.planned_end_s
    if extended < NOTED_S:
        return None
    if schedule_done_s is None:
        return (f"{EXTENDED} by {extended:.1f} s to its cap ({end_s:.1f} s) and the nemesis "
                f"schedule was still not done: a step hung or took too long")
    return (f"{EXTENDED} by {extended:.1f} s (to {end_s:.1f} s): the nemesis "
            f"schedule's last heal was done at {schedule_done_s:.1f} s, later than planned, "
            f"and the planned {plan.tail_s:.1f} s of workload follow it")


def account(plan: EndPlan, end_s: float, schedule_done_s: float | None) -> dict[str, float | None]:
    """The run's ``workload_end`` (run.json): when the workload was planned to end and did."""
    return {"planned_end_s": round(plan.planned_end_s, 3), "end_s": round(end_s, 3),
            "extended_s": round(max(0.0, end_s - plan.planned_end_s), 3),
            "schedule_shift_s": plan.shift_s, "schedule_done_s": schedule_done_s,
            "cap_s": round(plan.cap_s, 3)}
