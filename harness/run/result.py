"""A run's result: what ``run.json`` holds and ``run --json`` prints, as plain data.

Its own module because the suites that judge runs (``suites/failover``, ``suites/chaos``) read
it as much as the runner writes it, and it needs nothing of the runner.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from harness.checker.result import SCHEMA_VERSION


@dataclass
class RunResult:
    run_id: str
    dir: str
    seed: int
    exit_code: int
    valid: bool | None
    cluster: str
    guarantee: str
    schedule: list[dict[str, Any]] = field(default_factory=list)
    nemesis: list[dict[str, Any]] = field(default_factory=list)
    clients: list[dict[str, Any]] = field(default_factory=list)
    final_read: list[dict[str, Any]] = field(default_factory=list)
    # After a transactional workload: how long the final read waited for no transaction to be
    # open, and where it waited in vain (harness.workload.final_read.StableWait).
    final_wait: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    anomalies: dict[str, int] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    report: list[str] = field(default_factory=list)
    suites: dict[str, Any] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=dict)  # the soak judgement, if a soak
    engine: dict[str, Any] = field(default_factory=dict)  # what judged, and why (auto)
    # When the workload was planned to end and did, in seconds after the run's start: the
    # schedule starts late by schedule_shift_s (the warm-up gate) and the end moves while the
    # schedule is not done, up to cap_s (harness.run.deadline).
    workload_end: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The run's result JSON (``run.json``, ``run --json``), versioned like report.json."""
        return {"schema_version": SCHEMA_VERSION, **asdict(self)}
