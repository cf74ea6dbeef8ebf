"""Randomized chaos: a seeded nemesis over a produce/consume workload, then the checker.

Jepsen's shape (:mod:`suites.seeded_chaos`, which the transactions suite's chaos tests share):
producers (acks=all, idempotent) and group consumers record every operation in a history while
the nemesis cuts the network into every shape, kills, pauses, cuts unflushed log tails and adds
latency; then everything heals, a final read takes each partition from the start to its high
watermark, and the checker judges the whole history against at-least-once. The run has a
cluster of its own (the same kind as the target), with min.insync.replicas=2.

The seed decides the whole schedule. A failing run prints the command that replays it; its run
directory (history, logs, report.html) is kept and printed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cluster.kinds import Capability
from harness.cluster.targets import Target
from harness.plugin.options import kafka_options
from harness.run.runner import RunResult

from ..seeded_chaos import Chaos, seeded_chaos_run

GUARANTEE = "at-least-once"
SHORT_FAULTS = ("partition", "kill", "pause", "lose-unflushed", "latency")
LONG_FAULTS = (*SHORT_FAULTS, "stop", "crash-client")


def _chaos(cluster: Target, request: pytest.FixtureRequest, tmp_path: Path, duration_s: float,
           faults: tuple[str, ...]) -> RunResult:
    workload = kafka_options(request.config).chaos_workload
    lacking = cluster.missing(Capability.TRANSACTIONS) if workload.transactional else None
    if lacking:
        pytest.skip(f"--kafka-chaos-workload {workload}: {lacking}")
    option = ("--kafka-chaos-duration" if faults == SHORT_FAULTS
              else "--kafka-chaos-long-duration")
    result, _ = seeded_chaos_run(cluster, request, tmp_path, Chaos(
        workload, GUARANTEE, faults, duration_s, option, workload_option=True))
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
