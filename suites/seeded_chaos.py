"""A seeded chaos run judged by the checker, as the chaos suite and the transactions suite's
chaos tests make it.

Jepsen's shape: clients record every operation while a nemesis planned from one seed faults the
cluster; then everything heals, a final read takes each partition to its end, and the checker
judges the whole history against a guarantee (the runner's default engine, ``auto``: the
pure-Python one for a history this size, no JVM). The run has a cluster of its own of the
target's kind: its faults kill brokers and cut their logs, which the other suites' shared
cluster must not inherit. Its brokers have min.insync.replicas=2, so every acknowledged record
is on two replicas before the ack.

The seed decides the whole schedule — with ``targets``, which roles its faults aim at too
(:func:`harness.nemesis.schedule.plan`). A failing run says the pytest command that replays
it, and its run directory (history, logs, report.html) is kept and named; every run prints
that command, so a passing run's seed is on record as well.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

from harness.checker.result import GUARANTEES
from harness.cluster.targets import Target
from harness.nemesis.schedule import plan
from harness.plugin.options import kafka_options
from harness.run.runner import INFRASTRUCTURE, Run, RunOptions, RunResult
from harness.workload.kinds import WorkloadKind

from .support import own_cluster_options


@dataclass(frozen=True)
class Chaos:
    """What one chaos test runs: its workload for ``duration_s`` under ``faults``, judged
    against ``guarantee``. ``targets`` (nodes or roles) aims the faults that act on one node
    at them in turn; without, the seed draws brokers and partition shapes. For the replay
    command: ``duration_option`` is the pytest option that sets the duration, and
    ``workload_option`` says whether ``--kafka-chaos-workload`` chose the workload (the chaos
    suite's) rather than the test itself."""

    workload: WorkloadKind
    guarantee: str
    faults: tuple[str, ...]
    duration_s: float
    duration_option: str
    targets: tuple[str, ...] = ()
    workload_option: bool = False


def seeded_chaos_run(cluster: Target, request: pytest.FixtureRequest, tmp_path: Path,
                     chaos: Chaos) -> tuple[RunResult, str]:
    """Carry out ``chaos`` on a cluster of its own with the seed of ``--kafka-chaos-seed`` (or
    a random one); fail unless the run happened, the nemesis did something and the checker
    found nothing the guarantee forbids. Returns the result and the replay line."""
    seed = kafka_options(request.config).chaos_seed
    seed = random.randrange(2**31) if seed is None else seed
    brokers = max(3, cluster.brokers)
    # Aimed faults are planned here, from the same seed and with the runner's own pacing;
    # the run follows that schedule (its replay is this test, with the seed).
    schedule = (tuple(plan(seed, chaos.faults, chaos.duration_s, brokers,
                           targets=chaos.targets)) if chaos.targets else None)
    options = RunOptions(
        duration_s=chaos.duration_s, brokers=brokers, nemesis=chaos.faults, seed=seed,
        guarantee=chaos.guarantee, run_dir=tmp_path / f"chaos-seed{seed}", partitions=3,
        producers=2, consumers=2, rate=50.0, consumer_mode="group", commit="after", acks="all",
        idempotence=True, workload=chaos.workload, schedule=schedule,
        **own_cluster_options(cluster, request))
    result = Run(options, Console(stderr=True)).execute()
    workload = f" --kafka-chaos-workload {chaos.workload}" if chaos.workload_option else ""
    replay = (f"replay: pytest {request.node.nodeid} --kafka-chaos-seed {seed} "
              f"{chaos.duration_option} {chaos.duration_s:g}{workload}; "
              f"run directory {result.dir}")
    print(replay)
    assert result.exit_code != INFRASTRUCTURE, f"the run could not be carried out: " \
                                               f"{result.error}; {replay}"
    forbidden = {name: count for name, count in result.anomalies.items()
                 if count and name in GUARANTEES[chaos.guarantee]}
    assert result.valid, (f"the checker found what {chaos.guarantee} forbids: {forbidden}; "
                          f"report {result.report}; {replay}")
    assert result.nemesis, f"the nemesis injected nothing; {replay}"
    assert result.stats["sends_ok"] > 0, f"no send was acknowledged; {replay}"
    return result, replay
