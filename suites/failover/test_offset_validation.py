"""Kafka's consumer offset validation system test, as suite tests judged by the checker.

Apache Kafka's ``tests/kafkatest/tests/client/consumer_test.py`` runs a consumer group while
producers write, bounces brokers or the consumers themselves, and then checks what the group
saw. Three of its scenarios set the floor here, each a run of the harness's own
(:mod:`suites.failover.judged`: checker-judged, at-least-once, commit after processing):

* a rolling broker bounce — every broker restarted cleanly in turn — causes no rebalance at all,
  and in the end each partition's committed position is the one after the last record the
  group consumed;
* static members (KIP-345) killed and replaced within their session timeout cause no rebalance:
  the replacement takes over its predecessor's ``group.instance.id`` and assignment;
* dynamic members killed (a hard consumer bounce) do cause rebalances, yet the group loses
  nothing and its commits never go back.

"No rebalance" is read from the history: the consumers record every assignment and revocation
with the group generation they hold, so after the first fault there must be no revocation and
no assignment in another generation.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cluster.targets import Target
from harness.history import Event
from harness.nemesis.schedule import repeated, rolling
from harness.run.runner import RunResult

from .judged import fault_windows, history, judged_run, measured_bounce_s, workload_end_ns

TOPIC = "validation"
# The schedule starts once the group is Stable with every member assigned (the runner's
# warm-up gate); before it, a schedule timed from the run's start bounced a broker before the
# group had first formed (at load average 30, 29 s into the run), and that first formation was
# counted as a rebalance. START_S after it, each consumer has recorded its assignment.
START_S = 3.0
BOUNCE_S = 10.0  # between bounces: the broker rejoins the ISR, the coordinator settles
# A broker's bounce (stop, then start) comes on top, measured on the target before the run
# (judged.measured_bounce_s): about 5 s for a ZooKeeper-mode broker on an idle machine, 14.6 and
# 16.3 s for a KRaft node of Kafka 4.4 (it replays the metadata log and waits to be unfenced),
# 35.5 s for Apache Kafka 3.9.2 at load average 31. A restart slower than measured no longer
# ends the workload early: the runner keeps it going until the last heal is done.
TAIL_S = 8.0
CONSUMERS = 2

pytestmark = [pytest.mark.requires_process_faults, pytest.mark.requires_multi_broker]


CLOSING_S = 0.5  # the clients stop at the run's end; their close revokes what they held


def _group_changes_after(events: list[Event], time_ns: int, result: RunResult) -> list[Event]:
    """Assignments and revocations after `time_ns` and before the clients begin to stop (the
    workload's end as the runner moved it)."""
    end_ns = workload_end_ns(result) - CLOSING_S * 1e9
    return [e for e in events if e.f in ("assign", "revoke") and time_ns < e.time_ns < end_ns]


def _first_fault_ns(events: list[Event]) -> int:
    windows = fault_windows(events)
    assert windows, "no fault held during the run"
    return min(w.start_ns for w in windows)


def _generation_before(events: list[Event], time_ns: int) -> int:
    assigned = [e.generation for e in events if e.f == "assign" and e.time_ns < time_ns]
    assert assigned, "the group had no assignment before the first fault"
    return max(assigned)


def _describe(rows: list[Event]) -> str:
    return "; ".join(f"process {e.process} {e.f} {e.topic}-{e.partition} generation "
                     f"{e.generation}" for e in rows[:6])


def _rebalance_reasons(run_dir: str) -> list[str]:
    """The run's own brokers' log lines about members leaving or failing and rebalances
    starting (both kinds log these phrases), and its consumers' last complaints, so a failure
    in CI — whose run directory is gone by the time anyone reads it — says why the group
    moved."""
    phrases = ("Preparing to rebalance", "has failed", "left group", "removing it")
    root = Path(run_dir)
    lines: list[str] = []
    for path in sorted(root.glob("cluster/broker-*/*.log")):
        lines += [f"{path.parent.name}: {line.strip()[-300:]}"
                  for line in path.read_text(errors="replace").splitlines()
                  if any(phrase in line for phrase in phrases)]
    for path in sorted(root.glob("logs/*consumer*.log")):
        tail = path.read_text(errors="replace").splitlines()[-3:]
        lines += [f"{path.stem}: {line.strip()[-300:]}" for line in tail]
    return lines[-14:]


def _positions_and_consumed(events: list[Event]) -> tuple[dict[int, int], dict[int, int]]:
    """{partition: the group's last committed position}, {partition: last offset the group's
    members read + 1}. The final read's polls (no group) are left out: it reads every partition
    to its end after the group has closed, and a record produced after the group's last poll is
    one the group never consumed, not one it failed to commit — Kafka's system test compares
    each consumer's last commit with that consumer's own position."""
    committed: dict[int, int] = {}
    for e in sorted((e for e in events if e.f == "commit" and e.type == "ok"),
                    key=lambda e: e.time_ns):
        assert e.offset is not None
        committed[e.partition] = e.offset
    consumed: dict[int, int] = {}
    for e in events:
        if e.f == "poll" and e.type == "ok" and e.offset is not None and e.group is not None:
            consumed[e.partition] = max(consumed.get(e.partition, 0), e.offset + 1)
    return committed, consumed


def _last_commits_and_polls(events: list[Event], committed: dict[int, int],
                            consumed: dict[int, int]) -> list[str]:
    """For the partitions whose committed position and consumption differ, the last few commit
    events (failed ones too) and polls, so a CI failure — whose history is gone by the time
    anyone reads it — says whether a commit failed or none was made."""
    differing = {p for p in set(committed) | set(consumed) if committed.get(p) != consumed.get(p)}
    mine = sorted((e for e in events if e.partition in differing), key=lambda e: e.time_ns)
    commits = [e for e in mine if e.f == "commit"][-4:]
    polls = [e for e in mine if e.f == "poll" and e.type == "ok"][-3:]
    return [f"{e.time_ns} process {e.process} {e.f} {e.type} p{e.partition}@{e.offset}"
            f"{' ' + str(e.error) if e.error else ''}" for e in commits + polls]


def _kill_consumers(cluster: Target, request: pytest.FixtureRequest, run_dir: Path, *,
                    static_members: bool) -> tuple[RunResult, int, list[Event]]:
    """A judged run in which a consumer is killed twice (the generator replaces it): the
    result, the group's generation before the first kill, the group's changes after it."""
    schedule = repeated("crash-client", "consumer", 2, start_s=START_S, held_s=0,
                        quiet_s=BOUNCE_S)
    result = judged_run(cluster, request, run_dir, schedule, BOUNCE_S + TAIL_S, topic=TOPIC,
                        consumers=CONSUMERS, static_members=static_members)
    events = history(result)
    first = _first_fault_ns(events)
    changes = _group_changes_after(events, first, result)
    return result, _generation_before(events, first), changes


def test_a_rolling_broker_bounce_causes_no_rebalance_and_positions_match_consumption(
        kafka_target: Target, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Restarting every broker in turn (controlled shutdown, then start) neither rebalances the consumer group nor loses anything acknowledged, and each partition's final committed position is one past the last record consumed [Kafka system test consumer_test.py, test_broker_rolling_bounce]."""  # noqa: E501
    brokers = [f"broker-{b}" for b in sorted(kafka_target.require_nodes().brokers)]
    bounce_s = BOUNCE_S + measured_bounce_s(kafka_target, "stop")
    schedule = rolling("stop", brokers, start_s=START_S, quiet_s=bounce_s)
    result = judged_run(kafka_target, request, tmp_path / "rolling", schedule, BOUNCE_S + TAIL_S,
                        topic=TOPIC, consumers=CONSUMERS)
    events = history(result)
    changes = _group_changes_after(events, _first_fault_ns(events), result)
    assert not changes, f"the rolling bounce rebalanced the group: {_describe(changes)}; " \
                        f"run directory {result.dir}; why, as the brokers logged it: " \
                        f"{_rebalance_reasons(result.dir)}"
    committed, consumed = _positions_and_consumed(events)
    assert consumed, f"the group consumed nothing; run directory {result.dir}"
    assert committed == consumed, f"final committed positions {committed} differ from what " \
                                  f"was consumed {consumed}; run directory {result.dir}; " \
                                  f"the last commits and polls of those partitions: " \
                                  f"{_last_commits_and_polls(events, committed, consumed)}"


@pytest.mark.slow
def test_static_members_replaced_within_their_session_cause_no_rebalance(
        kafka_target: Target, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """A static member (group.instance.id) killed and replaced within its session timeout takes its place again without a rebalance: no member is revoked and every assignment stays in the same generation [KIP-345; Kafka system test consumer_test.py, test_static_consumer_bounce]."""  # noqa: E501
    result, generation, changes = _kill_consumers(kafka_target, request, tmp_path / "static",
                                                  static_members=True)
    unexpected = [e for e in changes if e.f == "revoke" or e.generation != generation]
    assert not unexpected, f"replacing static members rebalanced the group (generation " \
                           f"{generation} before): {_describe(unexpected)}; " \
                           f"run directory {result.dir}"
    assert any(e.f == "assign" for e in changes), \
        f"no replacement consumer was assigned a partition; run directory {result.dir}"


@pytest.mark.slow
def test_dynamic_members_killed_rebalance_and_lose_nothing(
        kafka_target: Target, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Killing consumers of a group (no static ids) makes the group rebalance to the replacements, and the run still loses nothing and no commit goes back [Kafka system test consumer_test.py, test_consumer_bounce]."""  # noqa: E501
    result, generation, changes = _kill_consumers(kafka_target, request, tmp_path / "dynamic",
                                                  static_members=False)
    later = {e.generation for e in changes if e.f == "assign"}
    assert later and min(later) > generation, \
        f"killing dynamic members did not move the group past generation {generation} " \
        f"(assignments after: {sorted(later)}); run directory {result.dir}"
