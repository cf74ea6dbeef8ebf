"""Chaos on transactions: both transactional workloads under a seeded nemesis aimed at the
brokers transactions rest on, judged by the checker's transaction rules.

Each test is a run of its own (:mod:`suites.seeded_chaos`: a cluster of the target's kind,
min.insync.replicas=2, the transaction state topic three replicas with min.isr 2) of 30 s or
more, so that at least two faults are planned: partitions, kills, pauses and lost unflushed log
tails, aimed in turn at the transaction coordinator of a running client (the leader of its
``__transaction_state`` partition: ``txn-coordinator``, bound to one running client's
transactional.id when the fault is applied, :mod:`harness.nemesis.roles`) and at the leaders
of a partition of each topic. Which faults come, when and in which order is the seed's; the
run prints the pytest command that replays it.

What Kafka promises, and so what each run must keep (``harness.checker.result.GUARANTEES``):

* ``transactions`` — KIP-98's atomic, read-committed writes: at-least-once, which forbids
  every transaction anomaly (an aborted or not-yet-committed value read committed, a committed
  transaction read in part, a cycle of transactions reading each other) and a lost committed
  write. Not exactly-once: its consumers are plain group consumers committing after they
  process, which Kafka lets read a record again after a rebalance (``redelivery``);
* ``consume-transform-produce`` — KIP-98/KIP-447's exactly-once processing: no input skipped
  (``unprocessed``, which at-least-once forbids) and no input record processed into two
  committed outputs: the checker's ``double_processed``, which counts more committed outputs of
  an input value than records of it (docs/history.md), asserted on its own. The run is judged
  at-least-once, not under the checker's ``exactly-once`` guarantee, because that also forbids
  ``duplicate`` (the whole history's, inputs included), which Kafka allows here: the input is
  written by plain idempotent producers, which wrote 215 input values twice in a 3.9 run
  with a leader paused 7.6 s (value 1-101 at offsets 102 and 187 of workload/2, its send
  acknowledged at 187 — a retry after the first attempt timed out in flight, presumably once
  librdkafka had reset its producer epoch; not traced). That is the input producer's
  behaviour, not the processors' promise. A value written twice is two input records, and
  processing both is right; ``double_processed`` leaves it alone (72 such values in one 4.4
  run, 184 in another, every one processed as many times as it was written).

The tests also fail unless the schedule aimed at the coordinator and a leader, its first
fault — on the coordinator in one test, on a leader in the other — was done, and some
transactions committed: a run that proved nothing does not pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cluster.targets import Target
from harness.nemesis.schedule import TXN_COORDINATOR, leader_of
from harness.plugin.options import kafka_options
from harness.run.runner import RunResult
from harness.workload.kinds import WorkloadKind, workload_topics

from ..seeded_chaos import Chaos, seeded_chaos_run

FAULTS = ("partition", "kill", "pause", "lose-unflushed")
MIN_DURATION_S = {WorkloadKind.TRANSACTIONS: 30.0, WorkloadKind.CONSUME_TRANSFORM_PRODUCE: 45.0}
"""A run's least duration: the schedule's first fault comes at 3 s and its last heal by 3 s
before the end, each fault held 3-8 s with 2-5 s between — so 30 s hold two faults at least,
one for the coordinator and one for a leader. The processors need longer: a processor whose
coordinator was faulted may spend 10 s and more in ``init_transactions`` (``Coordinator load in
progress``) before it is replaced, and a 30 s run on 3.9 once committed no transaction."""
TOPIC = "workload"  # the runner's

pytestmark = [pytest.mark.requires_transactions, pytest.mark.requires_faults,
              pytest.mark.requires_process_faults, pytest.mark.requires_multi_broker,
              pytest.mark.slow]


def _targets(workload: WorkloadKind) -> tuple[str, ...]:
    """The roles the faults aim at in turn: the transaction coordinator, the leader of
    partition 0 of the topic written in transactions, and of partition 1 of the other (the
    input of consume-transform-produce). The transactions test starts with the coordinator,
    the consume-transform-produce test with the leader, so that each role is the first fault
    of one test: the first is always done, while a slow fault can hold the nemesis past the
    run's end (on KRaft a lose-unflushed restart once took 31 s of a 30 s run)."""
    first, second = workload_topics(workload, TOPIC)
    roles = (TXN_COORDINATOR, leader_of(second, 0), leader_of(first, 1))
    return roles if workload is WorkloadKind.TRANSACTIONS else (*roles[1:], roles[0])


def _faults_done(result: RunResult) -> list[str]:
    """The descriptions of the faults the nemesis did (heals and failed faults excluded)."""
    return [str(done["what"]) for done in result.nemesis
            if "error" not in done and not str(done["what"]).startswith("heal")]


def _txn_chaos(cluster: Target, request: pytest.FixtureRequest, tmp_path: Path,
               workload: WorkloadKind) -> None:
    duration = max(MIN_DURATION_S[workload], kafka_options(request.config).chaos_duration_s)
    targets = _targets(workload)
    result, replay = seeded_chaos_run(cluster, request, tmp_path, Chaos(
        workload, "at-least-once", FAULTS, duration, "--kafka-chaos-duration", targets))
    doubled = result.anomalies["double_processed"]
    assert not doubled, (f"{doubled} input value(s) processed into more committed outputs than "
                         f"records of them (double_processed); report {result.report}; {replay}")
    aimed = {step["target"].removeprefix("isolate ") for step in result.schedule}
    assert aimed >= set(targets[:2]), f"the schedule aimed at {aimed}, not {targets[:2]}"
    first, done = result.schedule[0]["description"], _faults_done(result)
    assert first in done, f"the first fault ({first}) was not done: {result.nemesis}; {replay}"
    assert result.stats["txns_committed"] > 0, f"no transaction committed: {result.stats}; " \
                                               f"{replay}"


def test_transactions_stay_atomic_and_read_committed_under_faults_on_their_coordinator_and_leaders(  # noqa: E501
        kafka_target: Target, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Transactional producers over two topics, read_committed consumers: with partitions, kills, pauses and lost unflushed tails of the transaction coordinator and the leaders, no aborted or uncommitted value is read committed, no committed transaction is read in part or lost [KIP-98; Kafka docs, Design: Message Delivery Semantics]."""  # noqa: E501
    _txn_chaos(kafka_target, request, tmp_path, WorkloadKind.TRANSACTIONS)


def test_consume_transform_produce_processes_each_input_exactly_once_under_faults_on_its_coordinator_and_leaders(  # noqa: E501
        kafka_target: Target, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Processors that read, transform, write and commit their input offsets in one transaction: under the same faults every input is processed into exactly one committed output [KIP-98; KIP-447; Kafka docs, Design: Message Delivery Semantics]."""  # noqa: E501
    _txn_chaos(kafka_target, request, tmp_path, WorkloadKind.CONSUME_TRANSFORM_PRODUCE)
