"""The workload's end as the runner moves it (harness/run/deadline.py, harness/run/supervise.py):
pure over the plan and what the nemesis has done."""

from __future__ import annotations

import pytest

from harness.nemesis.schedule import Step
from harness.run.deadline import (
    MIN_EXTENSION_S,
    EndPlan,
    account,
    extension_note,
    workload_end_s,
)
from harness.run.supervise import WorkloadClock, status_text
from harness.workload.context import read_end

# Two bounces planned at 5 s and 13 s of a 20 s run: the last heal is planned at 13 s, so the
# planned tail after it is 7 s.
STEPS = [Step(5.0, 5.0, "kill", "broker-1"), Step(13.0, 13.0, "kill", "broker-2")]


def test_the_plan_reads_the_tail_after_the_last_planned_heal():
    plan = EndPlan.of(20.0, STEPS)
    assert (plan.tail_s, plan.planned_end_s) == (7.0, 20.0)
    assert plan.cap_s == 20.0 + MIN_EXTENSION_S  # a short run may still wait a minute
    assert EndPlan.of(300.0, STEPS).cap_s == 600.0  # a long one: its duration again
    assert EndPlan.of(20.0, []).tail_s == 20.0
    assert EndPlan.of(10.0, [Step(8.0, 12.0, "kill", "broker-1")]).tail_s == 0.0


def test_while_the_schedule_has_steps_to_do_the_end_is_the_cap():
    plan = EndPlan.of(20.0, STEPS)
    assert workload_end_s(plan, None) == plan.cap_s


def test_a_schedule_done_on_time_ends_at_the_planned_end():
    plan = EndPlan.of(20.0, STEPS)
    assert workload_end_s(plan, 13.0) == 20.0
    assert workload_end_s(plan, 0.0) == 20.0  # no steps at all
    assert extension_note(plan, 20.0, 13.0) is None
    # A heal that takes 0.4 s is followed by the whole tail: the end moves by as much.
    assert workload_end_s(plan, 13.4) == pytest.approx(20.4)


def test_a_late_last_heal_is_followed_by_the_planned_tail():
    plan = EndPlan.of(20.0, STEPS)
    # The first restart took 23 s: the second kill came at 28 s, its heal was done at 40 s.
    assert workload_end_s(plan, 40.0) == 47.0
    note = extension_note(plan, 47.0, 40.0)
    assert note is not None and "extended by 27.0 s" in note and "40.0 s" in note
    assert account(plan, 47.0, 40.0)["extended_s"] == 27.0


def test_the_cap_holds_however_late_the_schedule_is():
    plan = EndPlan.of(20.0, STEPS, extension_cap_s=15.0)
    assert workload_end_s(plan, None) == 35.0
    assert workload_end_s(plan, 100.0) == 35.0
    note = extension_note(plan, 35.0, None)
    assert note is not None and "still not done" in note


def test_the_warm_up_shift_moves_the_steps_and_the_end():
    plan = EndPlan.of(20.0, STEPS, shift_s=6.5)
    assert [(s.at_s, s.heal_at_s) for s in plan.shifted(STEPS)] == [(11.5, 11.5), (19.5, 19.5)]
    assert plan.planned_end_s == 26.5 and plan.cap_s == 26.5 + MIN_EXTENSION_S
    assert workload_end_s(plan, 19.5) == 26.5
    assert workload_end_s(plan, 30.0) == 37.0
    assert account(plan, 26.5, 19.5)["schedule_shift_s"] == 6.5


def test_the_clock_writes_the_cap_before_the_clients_start_and_then_what_the_plan_says(
        tmp_path):
    path = tmp_path / "workload-end"
    clock = WorkloadClock(path, EndPlan.of(20.0, STEPS))
    assert read_end(path) == int(clock.plan.cap_s * 1e9)
    assert clock.update(None) == clock.plan.cap_s
    assert clock.update(14.0) == 21.0 and read_end(path) == int(21e9)


@pytest.mark.parametrize(("now_s", "end_s", "shown"), [
    (12.0, 80.0, "Workload  12.0/20 s —"),
    (25.0, 80.0, "+5.0 s waiting for the schedule (cap 80 s)"),
    (25.0, 31.0, "25.0/31 s, extended 11.0 s after a late heal"),
])
def test_the_status_line_says_why_the_workload_goes_on(now_s, end_s, shown):
    assert shown in status_text(now_s, EndPlan.of(20.0, STEPS), end_s, 3, "heal kill broker-2")
