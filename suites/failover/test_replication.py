"""Kafka's own replication system test, as suite tests judged by the checker.

Apache Kafka's ``tests/kafkatest/tests/core/replication_test.py`` sets the floor: a topic with
three partitions, three replicas and ``min.insync.replicas=2``; acks=all producers and a
consumer group run while one broker role — the leader of partition 0, or the controller — is
shut down or bounced, cleanly or hard, again and again; afterwards every acknowledged record
must have been consumed. Here each failure mode is a fixed nemesis schedule
(:func:`harness.nemesis.schedule.repeated`) on a run of the harness's own (a cluster of the
target's kind, started for the test, as the chaos suite does), and the history of every send,
poll, commit and fault is judged by the checker's rules (:mod:`suites.failover.judged`): a lost
acknowledged write, a read of something never written, offsets going backwards, a commit
regressing — all fail the test.

The modes, as Kafka's test defines them:

* ``clean_shutdown`` / ``hard_shutdown``: SIGTERM (controlled shutdown) or SIGKILL, the broker
  stays down until its leadership has moved, then starts again;
* ``clean_bounce`` / ``hard_bounce``: the same, started again at once.

Idempotence on and off, and compression, vary as in Kafka's matrix.

A heal that starts a broker again returns once the broker is registered and serves Metadata;
after a SIGKILL that includes ZooKeeper expiring its old session, so it takes seconds, and on a
loaded machine tens of them (Apache Kafka 3.9.2: 22.9 s, and 29.2 s at load average 31). The
nemesis waits for each heal before the next fault, and the runner keeps the workload going
until the last heal is done and :data:`REJOIN_S` plus :data:`TAIL_S` after it
(harness/run/deadline.py) — with a workload of fixed length, the first restart outlasted it,
the second fault never came and the run failed as "cut short". The faults are spaced by the
target's bounce time, measured just before the run
(:func:`~suites.failover.judged.measured_bounce_s`), plus :data:`REJOIN_S`, so the restarted
broker has rejoined the ISR before the next fault.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cluster.spec import ClusterSpec
from harness.cluster.targets import Target
from harness.nemesis.schedule import CONTROLLER, leader_of, repeated
from harness.run.runner import RunResult

from .judged import judged_run, measured_bounce_s

TOPIC = "replication"
TIMES = 2            # faults per run (Kafka's test: 3 shutdowns or 5 bounces)
START_S = 5.0        # workload before the first fault
REJOIN_S = 8.0       # after each heal: the broker restarts and catches up into the ISR
TAIL_S = 5.0         # workload after the last heal
SESSION_S = ClusterSpec().zookeeper_session_timeout_ms / 1000  # the runs' clusters use it

MODES = {
    # name: (fault, held down for)
    "clean_shutdown": ("stop", SESSION_S),
    "hard_shutdown": ("kill", SESSION_S + 2.0),
    "clean_bounce": ("stop", 0.0),
    "hard_bounce": ("kill", 0.0),
}


pytestmark = [pytest.mark.requires_process_faults,
              pytest.mark.requires_multi_broker]


def _replicate(cluster: Target, request: pytest.FixtureRequest, tmp_path: Path, mode: str, *,
               role: str = leader_of(TOPIC, 0), idempotence: bool = True,
               compression: str = "none") -> RunResult:
    fault, held_s = MODES[mode]
    # Each heal restarts a broker: the next fault comes after the restart and the rejoin; the
    # runner keeps the workload going past a late last heal (see the module's docstring).
    restart_s = measured_bounce_s(cluster, fault)
    schedule = repeated(fault, role, TIMES, start_s=START_S, held_s=held_s,
                        quiet_s=restart_s + REJOIN_S)
    return judged_run(cluster, request, tmp_path / f"replication-{mode}", schedule,
                      REJOIN_S + TAIL_S, topic=TOPIC, idempotence=idempotence,
                      compression=compression)


# clean_shutdown holds a broker down for a whole ZooKeeper session: slow, and the rolling
# bounce of the offset validation scenarios already stops brokers cleanly in every CI run.
@pytest.mark.parametrize("mode", ["hard_bounce",
                                  pytest.param("clean_shutdown", marks=pytest.mark.slow)])
def test_the_leader_fails_repeatedly_and_no_acknowledged_record_is_lost(
        kafka_target: Target, request: pytest.FixtureRequest, tmp_path: Path, mode: str) -> None:
    """With acks=all and min.insync.replicas=2, no acknowledged record is lost while the leader is shut down or bounced, again and again [Kafka system test replication_test.py; Kafka docs, Design: Replication]."""  # noqa: E501
    _replicate(kafka_target, request, tmp_path, mode)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["hard_shutdown", "clean_bounce"])
def test_the_leader_fails_repeatedly_in_the_other_modes(
        kafka_target: Target, request: pytest.FixtureRequest, tmp_path: Path, mode: str) -> None:
    """The same promise for the remaining failure modes of Kafka's replication test [Kafka system test replication_test.py]."""  # noqa: E501
    _replicate(kafka_target, request, tmp_path, mode)


@pytest.mark.slow
@pytest.mark.requires_controller
def test_the_controller_is_bounced_repeatedly_and_no_acknowledged_record_is_lost(
        kafka_target: Target, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Bouncing the controller (hard) loses no acknowledged record: a new controller takes over and the partitions it led move [Kafka system test replication_test.py, broker_type controller]."""  # noqa: E501
    _replicate(kafka_target, request, tmp_path, "hard_bounce", role=CONTROLLER)


@pytest.mark.slow
@pytest.mark.parametrize("compression", ["gzip", "lz4", "zstd"])
def test_compressed_batches_survive_leader_bounces(
        kafka_target: Target, request: pytest.FixtureRequest, tmp_path: Path,
        compression: str) -> None:
    """Compressed batches are replicated and read back whole across leader bounces [Kafka system test replication_test.py, compression_type]."""  # noqa: E501
    _replicate(kafka_target, request, tmp_path, "hard_bounce", compression=compression)


@pytest.mark.slow
def test_without_idempotence_leader_bounces_lose_nothing_acknowledged(
        kafka_target: Target, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Without idempotence retries may duplicate, but acks=all still loses no acknowledged record [Kafka system test replication_test.py, enable_idempotence=false]."""  # noqa: E501
    _replicate(kafka_target, request, tmp_path, "hard_bounce", idempotence=False)
