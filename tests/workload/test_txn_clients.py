"""Transactional producer processes against one Apache Kafka 3.9 broker, driven by hand: a
zombie fenced by its successor's ``init_transactions`` (``--txn-id-policy reuse``), and a
producer killed inside a transaction whose successor aborts (or completes) what it left open.

Each test runs the clients as the generator does — separate processes writing their journals —
then reads every partition back read_committed and checks the history row by row.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.targets import Target, start_target
from harness.history import Event, read_history
from harness.waiting import wait_for
from harness.workload import client
from harness.workload.context import RunContext
from harness.workload.final_read import final_read, wait_until_stable
from harness.workload.kinds import Isolation, TxnIdPolicy
from harness.workload.recorder import journal_path, salvage
from harness.workload.transactions import REPLACE_ME, TxnProducerSpec, TxnSettings

from . import txn_history as shape

PARTITIONS = 2
FENCED = {"_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"}
CLEANUP_INTERVAL = "transaction.abort.timed.out.transaction.cleanup.interval.ms"


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    # The coordinator looks for transactions past their timeout every 0.5 s, not Kafka's 10 s
    # (as the plugin's targets do): a killed producer's transaction is aborted within a second
    # of its 10 s timeout instead of up to 10 s later, which the last test would wait out.
    target = start_target("apache-kafka", brokers=1, run_dir=tmp_path_factory.mktemp("kafka"),
                          properties={CLEANUP_INTERVAL: 500})
    try:
        yield target
    finally:
        target.close()


class Clients:
    """Client processes of one test, killed at its end whatever happened."""

    def __init__(self, kafka: Target, name: str, tmp_path: Path, duration_s: float,
                 policy: TxnIdPolicy = TxnIdPolicy.REUSE) -> None:
        self.topics = (f"{name}-left", f"{name}-right")  # each test's own, values are reused
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        for made in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in self.topics]
                                        ).values():
            made.result(30)
        self.spec = TxnProducerSpec(kafka.bootstrap, self.topics,
                                    TxnSettings(name, policy, abort_p=0.2, seed=5),
                                    partitions=PARTITIONS, rate=400.0)
        self.history = tmp_path / "history"
        self.history.mkdir()
        self.logs = tmp_path / "logs"
        self.logs.mkdir()
        self.context = RunContext(str(self.history), "run-t", 1, time.monotonic_ns(),
                                  int(duration_s * 1e9))
        self.started: list[subprocess.Popen] = []

    def start(self, process: int) -> subprocess.Popen:
        """A producer process of the test's spec: every one has the same transactional.id."""
        with (self.logs / f"process-{process}.log").open("wb") as log:
            popen = subprocess.Popen(
                client.command("txn-producer", self.spec, self.context.with_process(process)),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        self.started.append(popen)
        return popen

    def committed_txns(self, process: int) -> int:
        journal = journal_path(self.history, process)
        return journal.read_text().count('"type":"ok","f":"txn"') if journal.exists() else 0

    def left_open(self, process: int) -> bool:
        """Whether the process's journal ends inside a transaction that has written: a txn
        invoke with no completion, and an acknowledged send after it (so the transaction holds
        its partitions' last stable offset). A dead process's last line may be torn: only
        whole lines count."""
        journal = journal_path(self.history, process)
        lines = journal.read_text().splitlines(keepends=True) if journal.exists() else []
        rows = [json.loads(line) for line in lines if line.endswith("\n")]
        begun = [i for i, row in enumerate(rows) if row.get("f") == "txn"]
        if not begun or rows[begun[-1]]["type"] != "invoke":
            return False
        return any(row.get("f") == "send" and row["type"] == "ok" for row in rows[begun[-1]:])

    def stop(self) -> None:
        for popen in self.started:
            if popen.poll() is None:
                popen.kill()
            popen.wait()
        salvage(self.history)

    @property
    def partitions(self) -> list[tuple[str, int]]:
        return [(t, p) for t in self.topics for p in range(PARTITIONS)]

    def read_back(self, bootstrap: str) -> list[Event]:
        partitions = self.partitions
        wait = wait_until_stable(bootstrap, partitions, timeout_s=40)
        assert wait.stable, wait.describe()
        reads = final_read(bootstrap, partitions, self.history, "run-t",
                           self.context.run_start_ns, 100, isolation=Isolation.READ_COMMITTED)
        assert all(r.complete for r in reads), reads
        return read_history(self.history)


def _check_common(events: list[Event], processes: set[int]) -> tuple[
        dict[int, shape.Transaction], set[str], set[str]]:
    txns = shape.transactions(events)
    shape.check_txn_columns(events, txns, processes)
    committed, aborted = shape.committed_and_aborted(events, txns)
    shape.check_no_aborted_read(events, aborted)
    shape.check_final_read_exactly_once(events, 100, committed, aborted)
    return txns, committed, aborted


def test_a_successor_with_the_same_transactional_id_fences_the_zombie(kafka, tmp_path):
    clients = Clients(kafka, "zombie-test", tmp_path, duration_s=12)
    try:
        zombie = clients.start(1)
        wait_for(lambda: clients.committed_txns(1) >= 3, 30, "three committed transactions")
        successor = clients.start(2)
        assert zombie.wait(timeout=40) == REPLACE_ME  # fenced: it cannot go on
        assert successor.wait(timeout=40) == 0
    finally:
        clients.stop()
    events = clients.read_back(kafka.bootstrap)
    txns, committed, _ = _check_common(events, {1, 2})

    rows = shape.by_process(events)
    last = [e for e in rows[1] if e.f == "txn"][-1]
    assert last.type in ("fail", "info") and last.error in FENCED, last
    successor_began = min(e.time_ns for e in rows[2] if e.f == "txn")
    zombie_commits = [e for e in rows[1] if e.f == "txn" and e.type == "ok"]
    assert len(zombie_commits) >= 3
    assert all(e.time_ns < successor_began for e in zombie_commits), \
        "the zombie committed after its successor had initialised"
    assert any(t.outcome == "ok" for t in txns.values() if t.process == 2)
    assert {t.txn_id for t in txns.values()} == {"zombie-test"}
    assert committed


def test_a_successor_resolves_the_transaction_a_killed_producer_left_open(kafka, tmp_path):
    clients = Clients(kafka, "killed-test", tmp_path, duration_s=10)
    try:
        killed = clients.start(1)
        wait_for(lambda: clients.committed_txns(1) >= 3, 30, "three committed transactions")
        killed.kill()
        killed.wait()
        assert clients.start(2).wait(timeout=40) == 0
    finally:
        clients.stop()
    events = clients.read_back(kafka.bootstrap)
    txns, _, _ = _check_common(events, {1, 2})

    read = shape.final_reads(events, 100)
    for txn in txns.values():  # every transaction is seen whole or not at all
        values = {e.value for e in events if e.f == "send" and e.type == "ok" and e.txn == txn.op}
        assert not values or values <= set(read) or not values & set(read), txn
    open_at_kill = [t for t in txns.values() if t.process == 1 and t.outcome is None]
    assert len(open_at_kill) <= 1
    assert any(t.outcome == "ok" for t in txns.values() if t.process == 2)


def test_the_final_read_waits_until_a_dead_producers_transaction_is_aborted(kafka, tmp_path):
    """A fresh transactional.id per process: nobody takes over a killed producer's id, so its
    open transaction holds back the last stable offset until the coordinator aborts it
    (transaction.timeout.ms, 10 s, found within the 0.5 s cleanup interval) — the final read's
    wait sees it, then sees it go."""
    clients = Clients(kafka, "fresh-test", tmp_path, duration_s=60, policy=TxnIdPolicy.FRESH)
    try:
        for process in range(1, 6):  # a kill may land between two transactions: try again
            producer = clients.start(process)
            wait_for(lambda: clients.committed_txns(process) >= 3, 30,  # noqa: B023
                     "three committed transactions")
            # Killed as soon as its journal shows a transaction that has written: it may still
            # commit in between (then the loop tries again).
            wait_for(lambda: clients.left_open(process), 30,  # noqa: B023
                     "a transaction with an acknowledged send")
            producer.kill()
            producer.wait()
            # A committed transaction's markers take milliseconds; a dead one's stay 10 s. Both
            # must agree: on a loaded machine a commit's markers can outlast the short wait,
            # and a kill can land after the broker committed but before the journal said so.
            held = wait_until_stable(kafka.bootstrap, clients.partitions, timeout_s=3)
            if not held.stable and clients.left_open(process):
                break
            if not held.stable:
                assert wait_until_stable(kafka.bootstrap, clients.partitions,
                                         timeout_s=40).stable, "a committed transaction's " \
                                                               "markers never came"
        else:
            pytest.fail("five kills and none inside a transaction")
        assert all("LSO" in what for what in held.unstable), held
        assert "in vain" in held.describe()
        released = wait_until_stable(kafka.bootstrap, clients.partitions, timeout_s=60)
        assert released.stable and 1 < released.waited_s < 40, released
    finally:
        clients.stop()
    events = clients.read_back(kafka.bootstrap)
    txns, _, _ = _check_common(events, set(range(1, 6)))
    killed = [t for t in txns.values() if t.process == process and t.outcome is None]
    assert len(killed) == 1 and killed[0].txn_id == f"fresh-test-p{process}"
    read = set(shape.final_reads(events, 100))
    aborted_by_coordinator = {e.value for e in events if e.f == "send" and e.txn == killed[0].op}
    assert aborted_by_coordinator and not aborted_by_coordinator & read
