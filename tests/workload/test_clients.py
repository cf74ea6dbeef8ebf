"""Producers and consumers against one reference broker: the rows they write are the contract's,
the checker finds nothing wrong with an honest run, and a planted fault shows up as predicted."""

import time
from collections import Counter, defaultdict

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from harness.checker.rules import check_events
from harness.cluster.peers import ReferenceBroker
from harness.history import read_history
from harness.workload.consumer import ConsumerSpec
from harness.workload.context import RunContext
from harness.workload.final_read import final_read
from harness.workload.generator import Generator, WorkloadSpec
from harness.workload.producer import ProducerSpec

TOPIC_PARTITIONS = 2


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with ReferenceBroker(
        tmp_path_factory.mktemp("broker"),
        properties={"offsets.topic.replication.factor": 1, "group.initial.rebalance.delay.ms": 0},
    ) as running:
        yield running


@pytest.fixture
def topic(broker, request):
    name = f"t-{request.node.name.replace('[', '-').replace(']', '')}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, TOPIC_PARTITIONS, 1)])[name].result(10)
    return name


def _context(tmp_path, seconds, process=1):
    return RunContext(str(tmp_path / "history"), "test-run", process, time.monotonic_ns(),
                      int(seconds * 1e9))


def test_an_honest_run_writes_contract_rows_and_checks_valid(broker, topic, tmp_path):
    context = _context(tmp_path, 8)
    workload = WorkloadSpec(broker.bootstrap, (topic,), producers=1, consumers=2, rate=60,
                            keys=5, group="honest")
    generator = Generator(workload, context, tmp_path / "logs")
    generator.start()
    ended = generator.wait()
    assert [e.returncode for e in ended] == [0, 0, 0]
    reads = final_read(broker.bootstrap, [(topic, p) for p in range(TOPIC_PARTITIONS)],
                       context.history_dir, context.run_id, context.run_start_ns,
                       generator.next_process)
    assert all(r.complete for r in reads)

    events = read_history(context.history_dir)  # validates every row against the contract
    sends = defaultdict(list)
    for e in events:
        if e.f == "send":
            sends[e.op].append(e)
    assert len(sends) > 100
    for rows in sends.values():  # one invoke then one completion, value "<process>-<n>"
        assert [r.type for r in rows] == ["invoke", "ok"]
        assert rows[1].offset >= 0 and rows[1].partition >= 0
        assert rows[0].value.startswith(f"{rows[0].process}-") and rows[0].key.startswith("k")
    group_reads = [e for e in events if e.f == "poll" and e.type == "ok" and e.group == "honest"]
    assert group_reads and all(e.member and e.generation >= 0 for e in group_reads)
    assigns = [e for e in events if e.f == "assign" and e.group == "honest"]
    assert {(e.topic, e.partition) for e in assigns} == {(topic, p) for p in (0, 1)}
    assert all(e.member and e.generation >= 0 for e in assigns)
    commits = [e for e in events if e.f == "commit"]
    assert commits and all(e.type == "ok" for e in commits)
    last_read = {}
    for e in sorted(group_reads, key=lambda e: (e.process, e.seq)):
        last_read[(e.process, e.partition)] = e.offset
    for c in commits:  # a commit is the next position: one past a record that process read
        assert c.offset - 1 in {e.offset for e in group_reads
                                if e.process == c.process and e.partition == c.partition}
    final = [e for e in events if e.f == "poll" and e.type == "ok" and e.group is None]
    assert Counter(e.value for e in final) == Counter(r[1].value for r in sends.values())

    result = check_events(events, "at-least-once")
    assert result.valid, result.to_json()["anomalies"]
    assert result.anomalies["lost_write"].count == result.anomalies["unseen"].count == 0


@pytest.mark.parametrize("commit, lost", [("before", True), ("after", False)])
def test_a_consumer_killed_after_committing_loses_records_only_if_it_committed_first(
    broker, topic, tmp_path, commit, lost
):
    """HISTORY.md: an ok send no poll read, while a poll read past it, is a lost_write. A
    consumer that commits before processing and dies in between leaves exactly that (no final
    read here: the group's own reads are what is judged); committing after processing does not."""
    context = _context(tmp_path, 16)
    roles = [
        ("producer", ProducerSpec(broker.bootstrap, (topic,), rate=100, max_sends=600)),
        ("consumer", ConsumerSpec(broker.bootstrap, (topic,), group=f"planted-{commit}",
                                  commit=commit, max_records=5, session_timeout_ms=6000,
                                  crash_after_commits=1)),
    ]
    generator = Generator(roles, context, tmp_path / "logs")
    generator.start()
    ended = generator.wait()
    crashed = [e for e in ended if e.role == "consumer" and e.returncode != 0]
    assert len(crashed) == 1 and crashed[0].replaced_by is not None

    events = read_history(context.history_dir)
    dead = crashed[0].process
    dead_rows = [e for e in events if e.process == dead]
    assert dead_rows[-1].f == "commit"  # it died right after its commit returned
    assert any(e.f == "poll" for e in events if e.process == crashed[0].replaced_by)

    at_least_once = check_events(events, "at-least-once")
    at_most_once = check_events(events, "at-most-once")
    if lost:
        assert at_least_once.anomalies["lost_write"].count >= 1
        assert not at_least_once.valid and at_least_once.failing == ["lost_write"]
        assert not [e for e in dead_rows if e.f == "poll"]  # it never processed what it committed
    else:
        assert at_least_once.anomalies["lost_write"].count == 0
        assert at_least_once.valid, at_least_once.to_json()["anomalies"]
    assert at_most_once.valid


def test_auto_commit_and_assign_mode_consumers_record_their_own_shapes(broker, topic, tmp_path):
    context = _context(tmp_path, 7)
    roles = [
        ("producer", ProducerSpec(broker.bootstrap, (topic,), rate=80, partitions=2)),
        ("consumer", ConsumerSpec(broker.bootstrap, (topic,), group="auto", commit="auto",
                                  auto_commit_interval_ms=500)),
        ("consumer", ConsumerSpec(broker.bootstrap, (topic,), mode="assign")),
    ]
    generator = Generator(roles, context, tmp_path / "logs")
    generator.start()
    assert [e.returncode for e in generator.wait()] == [0, 0, 0]
    events = read_history(context.history_dir)
    sends = [e for e in events if e.f == "send" and e.type == "invoke"]
    assert {e.partition for e in sends} == {0, 1}  # named by the producer, alternating
    auto_commits = [e for e in events if e.f == "commit" and e.process == 2]
    assert len(auto_commits) >= 4 and all(e.group == "auto" and e.type == "ok"
                                         for e in auto_commits)
    assigned = [e for e in events if e.process == 3 and e.f in ("assign", "poll", "commit")]
    assert {(e.f, e.partition) for e in assigned if e.f == "assign"} == {("assign", 0),
                                                                        ("assign", 1)}
    assert all(e.group is None and e.generation == -1 for e in assigned)
    assert not [e for e in assigned if e.f == "commit"]
    reads = [e for e in assigned if e.f == "poll" and e.type == "ok"]
    assert len(reads) >= len(sends) * 0.8
    assert check_events(events, "exactly-once").valid
