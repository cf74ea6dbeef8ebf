"""A reference broker SIGKILLed in the middle of transactions, judged by the checker.

Three reference brokers run the transactional workload (two transactional producers across two
topics, read_committed group consumers). The schedule kills -9 the transaction coordinator of a
running producer (the leader of its ``__transaction_state`` partition; with three brokers it
usually leads data partitions of the open transactions too) and restarts it four seconds
later; the run then reads every partition back read_committed. One kill, not two: under load
a reference broker's restart took 19 s, and a second kill planned before the heal ended is not
carried out.

What a crash must not do (KIP-98): lose a committed transaction's record
(``lost_write``), let an aborted or not-yet-committed record be read (``aborted_read``,
``precommitted_read``), tear a transaction (``torn_transaction``), or make transactions read
each other in a cycle (``g1c``) — all forbidden by the at-least-once guarantee the run is
judged by, with the transaction rules of harness/checker/rules_txn.py. The restarted broker
recovers its producer state (snapshot, then the log after it: the open transactions, their
markers, the ``.txnindex`` files) before it serves; its successor as coordinator loads the
transaction state and completes or aborts what was open.

The test fails unless the kill happened while transactions were open (one began before it and
ended after it), and some transactions committed and some aborted: a run that proved
nothing does not pass.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from harness import history
from harness.checker.result import GUARANTEES
from harness.nemesis.schedule import TXN_COORDINATOR, Step
from harness.run.runner import Run, RunOptions
from harness.workload.kinds import WorkloadKind

GUARANTEE = "at-least-once"
TRANSACTION_ANOMALIES = ("lost_write", "aborted_read", "precommitted_read", "torn_transaction",
                         "g1c")
SCHEDULE = (Step(3.0, 7.0, "kill", TXN_COORDINATOR),)
DURATION_S = 15.0
BUSY_RATE = 1000.0
"""Sends per second, more than the producers can do: each begins its next transaction as soon
as the last ends, so one is open whenever the kill comes. At 50/s a transaction took 40 ms of
every 160 and an idle machine's kill found none open."""


def _spanning(events: list[history.Event], kill_ns: int) -> list[str]:
    """The outcomes of the transactions that began before ``kill_ns`` and ended after it."""
    began = {e.op: e.time_ns for e in events if e.f == "txn" and e.type == "invoke"}
    return [e.type for e in events if e.f == "txn" and e.type != "invoke"
            and began.get(e.op, kill_ns) < kill_ns < e.time_ns]


def test_a_reference_broker_killed_mid_transaction_loses_no_commit_and_shows_no_abort(
        tmp_path: Path) -> None:
    options = RunOptions(
        target="reference", brokers=3, duration_s=DURATION_S, nemesis=("kill",), seed=11,
        schedule=SCHEDULE, guarantee=GUARANTEE, run_dir=tmp_path / "run", partitions=3,
        producers=2, consumers=2, rate=BUSY_RATE, workload=WorkloadKind.TRANSACTIONS, abort_p=0.3,
        engine="python")
    result = Run(options, Console(stderr=True)).execute()
    assert result.error is None, result.error
    assert all(name in GUARANTEES[GUARANTEE] for name in TRANSACTION_ANOMALIES)
    found = {name: count for name, count in result.anomalies.items() if count}
    assert result.valid is True, (found, result.report)
    assert all(result.anomalies[name] == 0 for name in TRANSACTION_ANOMALIES), found

    (kill,) = [op for op in result.nemesis if op["what"].startswith("kill ")]
    assert "exit_code=-9" in kill["result"], result.nemesis
    events = history.read_history(Path(result.dir) / "history")
    (kill_ns,) = [e.time_ns for e in events
                  if e.f == "nemesis" and e.type == "invoke" and str(e.value).startswith("kill ")]
    assert _spanning(events, kill_ns), "no transaction was open across the kill"
    assert result.stats["txns_committed"] > 0 and result.stats["txns_aborted"] > 0, result.stats
    assert all(read["complete"] and read["isolation"] == "read_committed"
               for read in result.final_read), result.final_read
    assert result.final_wait is not None and result.final_wait["stable"] is True, \
        result.final_wait
