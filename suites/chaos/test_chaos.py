"""Randomized chaos: a seeded nemesis over a produce/consume workload, then the checker.

Jepsen's shape: producers (acks=all, idempotent) and group consumers record every operation in a
history while the nemesis cuts the network into every shape, kills, pauses, cuts unflushed log
tails and adds latency; then everything heals, a final read takes each partition from the start
to its high watermark, and the checker judges the whole history against at-least-once (the
runner's default engine, ``auto``: the pure-Python one for a history this size, no JVM). The run
has a cluster of its own (the same kind as the target): its faults kill brokers and cut their
logs, which the other suites' shared cluster must not inherit. Its brokers have
min.insync.replicas=2, so every acknowledged record is on two replicas before the ack.

The seed decides the whole schedule. A failing run prints the command that replays it; its run
directory (history, logs, report.html) is kept and printed.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from rich.console import Console

from harness.checker.result import GUARANTEES
from harness.cluster.targets import Target
from harness.plugin.options import kafka_options
from harness.run.runner import INFRASTRUCTURE, Run, RunOptions, RunResult
from harness.workload.kinds import NO_TRANSACTIONS

from ..support import own_cluster_options

GUARANTEE = "at-least-once"
SHORT_FAULTS = ("partition", "kill", "pause", "lose-unflushed", "latency")
LONG_FAULTS = (*SHORT_FAULTS, "stop", "crash-client")


def _chaos(cluster: Target, request: pytest.FixtureRequest, tmp_path: Path, duration_s: float,
           faults: tuple[str, ...]) -> RunResult:
    chosen = kafka_options(request.config)
    seed = random.randrange(2**31) if chosen.chaos_seed is None else chosen.chaos_seed
    if chosen.chaos_workload.transactional and cluster.kind in NO_TRANSACTIONS:
        pytest.skip(f"--kafka-chaos-workload {chosen.chaos_workload}: "
                    f"{NO_TRANSACTIONS[cluster.kind]}")
    options = RunOptions(
        duration_s=duration_s, brokers=max(3, cluster.brokers), nemesis=faults, seed=seed,
        guarantee=GUARANTEE, run_dir=tmp_path / f"chaos-seed{seed}", partitions=3,
        producers=2, consumers=2, rate=50.0, consumer_mode="group", commit="after", acks="all",
        idempotence=True, workload=chosen.chaos_workload,
        **own_cluster_options(cluster, request))
    result = Run(options, Console(stderr=True)).execute()
    option = ("--kafka-chaos-duration" if faults == SHORT_FAULTS
              else "--kafka-chaos-long-duration")
    replay = (f"replay: pytest {request.node.nodeid} --kafka-chaos-seed {seed} "
              f"{option} {duration_s:g} --kafka-chaos-workload {chosen.chaos_workload}; "
              f"run directory {result.dir}")
    assert result.exit_code != INFRASTRUCTURE, f"the run could not be carried out: " \
                                               f"{result.error}; {replay}"
    forbidden = {name: count for name, count in result.anomalies.items()
                 if count and name in GUARANTEES[GUARANTEE]}
    assert result.valid, (f"the checker found what {GUARANTEE} forbids: {forbidden}; "
                          f"report {result.report}; {replay}")
    assert result.nemesis, f"the nemesis injected nothing; {replay}"
    assert result.stats["sends_ok"] > 0, f"no send was acknowledged; {replay}"
    return result


@pytest.mark.requires_faults
@pytest.mark.requires_process_faults
@pytest.mark.requires_multi_broker
def test_short_chaos_run_keeps_every_acknowledged_record(
        kafka_target: Target, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """With acks=all, idempotence and min.insync.replicas=2, no acknowledged record is lost under partitions, kills, pauses, lost unflushed tails and latency [Kafka docs, Design: Replication; KIP-98]."""  # noqa: E501
    result = _chaos(kafka_target, request, tmp_path, kafka_options(request.config).chaos_duration_s,
                    SHORT_FAULTS)
    applied = {step["fault"] for step in result.schedule}
    assert applied, "the schedule has no faults: the run is too short for the nemesis"


@pytest.mark.slow
@pytest.mark.chaos_long
@pytest.mark.requires_faults
@pytest.mark.requires_process_faults
@pytest.mark.requires_multi_broker
def test_long_chaos_run_keeps_every_acknowledged_record(
        kafka_target: Target, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The same promise over a long run with every fault, graceful stops and crashed clients included [Kafka docs, Design: Replication; KIP-98]."""  # noqa: E501
    result = _chaos(kafka_target, request, tmp_path,
                    kafka_options(request.config).chaos_long_duration_s, LONG_FAULTS)
    assert len({step["fault"] for step in result.schedule}) >= 3
