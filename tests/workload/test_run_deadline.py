"""A real run (reference brokers) whose schedule ends later than planned: the workload must
last until the last heal is done and go on for the planned tail after it.

Two bounces planned half a second apart: a reference broker's restart (a Python process
started and registered again) takes seconds, and the second kill waits for the first heal, so
the schedule ends seconds after its plan and the end must move by as much. With the end fixed
on the clients' command line (before harness/run/deadline.py) a 3 s run stopped its workload
at 3 s, the nemesis was halted during the first heal and the second kill never came.

The run is planned for 12 s, which leaves 10.5 s of workload after the last planned heal (the
tail the end keeps after the real one). The consumer reads nothing for seconds after each kill
(measured idle: 5-6 s, resuming about when the heal was done): a record is readable once every
in-sync replica has it, the killed broker leaves the ISR only later, and a commit waits while the
group's coordinator is down. With a 1.5 s tail (a 3 s run, fresh-clone CI 2026-11-28) and
then a 4.5 s one (6 s, fresh-clone CI 2026-11-28 again) a loaded machine's consumer read nothing
in the part of the tail this test looks at. How far the end moves does not depend on the
duration (the tail grows with it), so the test still sees it move.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from harness import history
from harness.nemesis.schedule import Step
from harness.run.deadline import EXTENDED
from harness.run.runner import VALID, Run, RunOptions

DURATION_S = 12.0
SCHEDULE = (Step(1.0, 1.0, "kill", "broker-1"), Step(1.5, 1.5, "kill", "broker-2"))
TAIL_S = DURATION_S - 1.5  # the planned workload after the last planned heal


def test_the_workload_lasts_until_the_schedule_is_done_and_its_tail_after(tmp_path: Path):
    options = RunOptions(duration_s=DURATION_S, seed=7, nemesis=("kill",), schedule=SCHEDULE,
                         run_dir=tmp_path / "run", producers=1, consumers=1, rate=50.0,
                         engine="python")
    result = Run(options, Console(stderr=True)).execute()
    assert result.exit_code == VALID, (result.error, result.notes, result.anomalies)

    events = history.read_history(tmp_path / "run" / "history")
    nemesis = {(e.value, e.type): e.time_ns for e in events if e.f == "nemesis"}
    for step in SCHEDULE:
        for what in (step.description, step.heal):
            assert (what, "ok") in nemesis, \
                f"every planned fault applied and healed: {what} missing; {result.nemesis}"
    last_heal_ns = nemesis[(SCHEDULE[-1].heal, "ok")]
    # The clients went on after the last heal: sends acknowledged and records read after it.
    # (The final read's polls, which come after every run, are the group-less ones.)
    after = {e.f for e in events if e.type == "ok" and e.time_ns > last_heal_ns + 0.5e9
             and (e.f == "send" or (e.f == "poll" and e.group is not None))}
    assert {"send", "poll"} <= after, f"client rows after the last heal: {sorted(after)}"

    # The run says how far the end moved and why, and the schedule started once the group was
    # Stable (its steps shifted by as much).
    end = result.workload_end
    shift = end["schedule_shift_s"]
    assert shift > 0
    assert [s["at_s"] for s in result.schedule] == pytest.approx([1.0 + shift, 1.5 + shift])
    assert abs(end["schedule_done_s"] - last_heal_ns / 1e9) < 0.1
    assert end["end_s"] >= end["schedule_done_s"] + TAIL_S - 0.01
    assert end["extended_s"] > 0 and end["end_s"] < end["cap_s"]
    assert any(note.startswith(EXTENDED) for note in result.notes), \
        result.notes
    first_assign_ns = min(e.time_ns for e in events if e.f == "assign")
    assert first_assign_ns < nemesis[(SCHEDULE[0].description, "invoke")]
