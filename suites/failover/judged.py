"""A workload run under a fixed nemesis schedule, judged by the checker: the failover suite's
scenarios from Kafka's own system tests (replication, consumer offset validation, degraded
network) share it.

Each scenario starts a cluster of its own of the target's kind (as the chaos suite does: the
faults and cut logs must not leak into the shared target), runs producers and a consumer group
while the schedule's faults come and go, reads everything back, and has the checker judge the
history. A run that could not be carried out, a fault that could not be applied or a schedule
cut short (a step that hung past the workload's cap) fails the test before the verdict is
looked at, so a scenario cannot pass by not happening. The checker is the pure-Python engine,
held equal to the PySpark one by a property test (a Spark session per test would cost more than
the run itself).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.checker.result import GUARANTEES
from harness.cluster.targets import Target
from harness.history import Event, read_history
from harness.nemesis import process as process_faults
from harness.nemesis.schedule import Step
from harness.run.runner import INFRASTRUCTURE, Run, RunOptions, RunResult

from ..support import own_cluster_options
from .placement import roles

GUARANTEE = "at-least-once"
RUN_DEFAULTS: dict[str, Any] = {
    "brokers": 3, "seed": 0, "guarantee": GUARANTEE, "partitions": 3, "producers": 2,
    "consumers": 1, "rate": 100.0, "consumer_mode": "group", "commit": "after", "acks": "all",
    "idempotence": True, "engine": "python"}


@dataclass(frozen=True)
class FaultWindow:
    """When a fault held, in the history's clock: from its ``ok`` row to its heal's ``invoke``."""

    description: str
    start_ns: int
    end_ns: int

    def holds(self, *times_ns: int) -> bool:
        return all(self.start_ns < t < self.end_ns for t in times_ns)


def measured_bounce_s(cluster: Target, fault: str) -> float:
    """Whole seconds one bounce of a broker takes on the session's target now: ``fault``
    ("kill" or "stop") on a broker that is not the controller, then its start, done as the
    nemesis does and heals them (a start returns once the broker is registered and serves
    Metadata; after a kill that includes ZooKeeper expiring its old session).

    A scenario bouncing brokers spaces its faults by this, so a restarted broker has rejoined
    before the next fault comes. The run no longer depends on the guess being right: the
    nemesis waits for each heal before the next fault, and the runner keeps the workload going
    until the last heal is done and for the planned tail after it (harness/run/deadline.py) —
    a schedule of fixed times made for an idle machine used to end the workload while a
    restart was still under way (Apache Kafka 3.9.2 at load average 31: 29.2 s for a killed
    broker, 29.7 s for a stopped one, 81 s at load 33-37 for a bounce measured at 16 s). If a
    restart is slower than measured, the next fault comes right after it."""
    nodes = cluster.require_nodes()
    node = nodes.spec.node_name(roles(cluster).first)
    started = time.monotonic()
    process_faults.apply(nodes, fault, node)
    process_faults.apply(nodes, "restart", node)
    return float(math.ceil(time.monotonic() - started))


def duration_s(schedule: list[Step], tail_s: float) -> float:
    """The planned length of a judged run's workload: until ``tail_s`` after the last planned
    heal. The runner shifts it by the warm-up and extends it past a late heal; what it became
    is the result's ``workload_end`` (:func:`workload_end_ns`)."""
    return max(step.heal_at_s for step in schedule) + tail_s


def workload_end_ns(result: RunResult) -> int:
    """When the run's clients were told to stop, in the history's clock. They stop then (a
    consumer's close revokes its partitions) and the final read's consumers come after, so
    group events past it are not the scenario's."""
    return int(result.workload_end["end_s"] * 1e9)


def judged_run(cluster: Target, request: pytest.FixtureRequest, run_dir: Path,
               schedule: list[Step], tail_s: float, **workload: Any) -> RunResult:
    """Run the workload for the schedule's length plus ``tail_s``; fail unless the run happened
    as scheduled and the checker found nothing the guarantee forbids.

    The runner starts the schedule once the consumer group is Stable and keeps the workload
    going until the last heal is done, so a schedule cut short is a real failure: a fault or
    heal that hung past the workload's cap (harness/run/deadline.py), not a slow restart."""
    duration = duration_s(schedule, tail_s)
    nemesis = tuple(dict.fromkeys(step.fault for step in schedule))
    options = RunOptions(**{**RUN_DEFAULTS, **workload}, duration_s=duration, nemesis=nemesis,
                         run_dir=run_dir, schedule=tuple(schedule),
                         **own_cluster_options(cluster, request))
    result = Run(options, Console(stderr=True)).execute()
    where = f"run directory {result.dir}"
    assert result.exit_code != INFRASTRUCTURE, \
        f"the run could not be carried out: {result.error}; {where}"
    failed = [step for step in result.nemesis if "error" in step]
    assert not failed, f"faults that could not be applied: {failed}; {where}"
    missing = Counter(what for step in schedule for what in (step.description, step.heal)) \
        - Counter(step["what"] for step in result.nemesis)  # "heal all" is not the schedule's
    assert not missing, f"the schedule was cut short: {sorted(missing.elements())} never " \
                        f"done; the workload's end {result.workload_end}; notes " \
                        f"{result.notes}; {where}"
    forbidden = {name: count for name, count in result.anomalies.items()
                 if count and name in GUARANTEES[options.guarantee]}
    assert result.valid, f"the checker found what {options.guarantee} forbids: {forbidden}; " \
                         f"report {result.report}; {where}"
    assert result.stats["sends_ok"] > 0, f"no send was acknowledged; {where}"
    return result


def history(result: RunResult) -> list[Event]:
    """The run's history, as the checker read it."""
    return read_history(Path(result.dir) / "history")


def fault_windows(events: list[Event]) -> list[FaultWindow]:
    """Every fault of the run that was applied, with when it held (heal-all rows excluded)."""
    applied: dict[str, int] = {}
    windows = []
    for e in sorted((e for e in events if e.f == "nemesis"), key=lambda e: e.time_ns):
        what = e.value or ""
        if e.type == "ok" and not what.startswith("heal"):
            applied[what] = e.time_ns
        elif e.type == "invoke" and what.startswith("heal ") and what[5:] in applied:
            windows.append(FaultWindow(what[5:], applied.pop(what[5:]), e.time_ns))
    return windows
