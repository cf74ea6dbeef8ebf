"""How a transaction's end is recorded, for each answer the transactional producer can give:
RecordedTransactions against a stand-in producer that answers as told, so every branch of the
ok / fail / info mapping (HISTORY.md, Transactions) is exercised without a broker."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException

from harness.history import Event, read_history
from harness.workload.recorder import Recorder
from harness.workload.transactions import DELIBERATE_ABORT, RecordedTransactions, TxnOutcome

TIMED_OUT = KafkaError(KafkaError._TIMED_OUT, "commit timed out", retriable=True)
ABORTABLE = KafkaError(KafkaError._OUTDATED, "a send failed", txn_requires_abort=True)
FENCED = KafkaError(KafkaError._FENCED, "fenced", fatal=True)
REFUSED = KafkaError(KafkaError._STATE, "abort refused")


class StandIn:
    """A transactional producer whose commit, abort and send_offsets raise what they are told
    (one answer per call, the last repeated); sends are queued and never delivered."""

    def __init__(self, commit: list[KafkaError | None] | None = None,
                 abort: list[KafkaError | None] | None = None,
                 offsets: list[KafkaError | None] | None = None) -> None:
        self.answers = {"commit": commit or [None], "abort": abort or [None],
                        "offsets": offsets or [None]}
        self.calls: list[str] = []

    def _answer(self, name: str) -> None:
        self.calls.append(name)
        answers = self.answers[name]
        error = answers.pop(0) if len(answers) > 1 else answers[0]
        if error is not None:
            raise KafkaException(error)

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def produce(self, *_: object, **__: object) -> None:
        self.calls.append("produce")

    def commit_transaction(self, _timeout: float) -> None:
        self._answer("commit")

    def abort_transaction(self, _timeout: float) -> None:
        self._answer("abort")

    def send_offsets_to_transaction(self, *_: object) -> None:
        self._answer("offsets")

    def poll(self, _timeout: float) -> int:
        return 0

    def flush(self, _timeout: float) -> int:
        return 0

    def purge(self) -> None:
        self.calls.append("purge")

    def __len__(self) -> int:
        return 0  # what waits for delivery: the queued sends are purged, none is in flight


def _one(tmp_path: Path, producer: StandIn, *, abort: bool = False,
         before: Callable[[RecordedTransactions], None] | None = None,
         ) -> tuple[TxnOutcome, RecordedTransactions, list[Event]]:
    tmp_path.mkdir(exist_ok=True)
    recorder = Recorder(tmp_path, "run-o", 1, 0)
    transactions = RecordedTransactions(producer, recorder, "tid", timeout_s=0.3)  # type: ignore[arg-type]
    op = transactions.begin()
    assert op is not None
    transactions.send("t", 0, "1-0")
    if before is not None:
        before(transactions)
    outcome = transactions.finish(abort=abort)
    recorder.close()
    return outcome, transactions, [e for e in read_history(tmp_path) if e.f == "txn"]


def _completion(rows: list[Event]) -> tuple[str, str | None]:
    assert [e.type for e in rows][0] == "invoke" and len(rows) == 2
    assert {e.value for e in rows} == {"tid"} and rows[0].op == rows[1].op
    return rows[1].type, rows[1].error


def test_a_commit_that_returns_is_ok(tmp_path):
    outcome, transactions, rows = _one(tmp_path, StandIn())
    assert outcome is TxnOutcome.OK and _completion(rows) == ("ok", None)
    assert transactions.usable


def test_a_deliberate_abort_that_returns_is_fail(tmp_path):
    outcome, transactions, rows = _one(tmp_path, StandIn(), abort=True)
    assert outcome is TxnOutcome.FAIL and _completion(rows) == ("fail", DELIBERATE_ABORT)
    assert transactions.usable


def test_a_commit_still_timing_out_when_its_time_is_up_is_info(tmp_path):
    producer = StandIn(commit=[TIMED_OUT])
    outcome, transactions, rows = _one(tmp_path, producer)
    assert outcome is TxnOutcome.INFO and _completion(rows) == ("info", "_TIMED_OUT")
    assert producer.calls.count("commit") >= 2  # retried while it could be
    assert not transactions.usable  # the process ends; a new one carries on


def test_a_retried_commit_that_then_returns_is_ok(tmp_path):
    producer = StandIn(commit=[TIMED_OUT, None])
    outcome, _, rows = _one(tmp_path, producer)
    assert outcome is TxnOutcome.OK and _completion(rows) == ("ok", None)


def test_an_abortable_commit_error_then_an_abort_that_returns_is_fail(tmp_path):
    producer = StandIn(commit=[ABORTABLE])
    outcome, transactions, rows = _one(tmp_path, producer)
    assert outcome is TxnOutcome.FAIL and _completion(rows) == ("fail", "_OUTDATED")
    assert producer.calls[-1] == "abort" and transactions.usable


def test_an_abort_that_fails_after_the_commit_was_tried_is_info(tmp_path):
    producer = StandIn(commit=[ABORTABLE], abort=[REFUSED])
    outcome, transactions, rows = _one(tmp_path, producer)
    assert outcome is TxnOutcome.INFO and _completion(rows) == ("info", "_STATE")
    assert not transactions.usable


def test_fencing_during_the_commit_is_info(tmp_path):
    outcome, _, rows = _one(tmp_path, StandIn(commit=[FENCED]))
    assert outcome is TxnOutcome.INFO and _completion(rows) == ("info", "_FENCED")


def test_an_abort_that_fails_before_any_commit_is_fail(tmp_path):
    outcome, transactions, rows = _one(tmp_path, StandIn(abort=[REFUSED]), abort=True)
    assert outcome is TxnOutcome.FAIL and _completion(rows) == ("fail", "_STATE")
    assert not transactions.usable


def test_fenced_before_the_commit_was_asked_is_fail_and_nothing_is_committed(tmp_path):
    producer = StandIn()
    outcome, transactions, rows = _one(
        tmp_path, producer, before=lambda t: t.send_offsets({("in", 0): 5}, lambda: b"g", {}))
    assert outcome is TxnOutcome.OK  # control: the same steps commit when nothing failed
    producer = StandIn(offsets=[FENCED])
    outcome, transactions, rows = _one(
        tmp_path / "fenced", producer,
        before=lambda t: t.send_offsets({("in", 0): 5}, lambda: b"g", {}))
    assert outcome is TxnOutcome.FAIL and _completion(rows) == ("fail", "_FENCED")
    assert "commit" not in producer.calls and not transactions.usable
    commits = [e for e in read_history(tmp_path / "fenced") if e.f == "commit"]
    assert [(e.type, e.offset, e.error) for e in commits] == [("fail", 5, "_FENCED")]


def test_failed_offsets_abort_the_transaction(tmp_path):
    producer = StandIn(offsets=[ABORTABLE])
    outcome, transactions, rows = _one(
        tmp_path, producer, before=lambda t: t.send_offsets({("in", 1): 7}, lambda: b"g", {}))
    assert outcome is TxnOutcome.FAIL and _completion(rows) == ("fail", "_OUTDATED")
    assert "commit" not in producer.calls and transactions.usable


@pytest.mark.parametrize("commit_asked, expected", [(False, "fail"), (True, "info")])
def test_giving_up_inside_a_transaction_says_whether_commit_was_asked(tmp_path, commit_asked,
                                                                      expected):
    recorder = Recorder(tmp_path, "run-o", 1, 0)
    producer = StandIn(commit=[TIMED_OUT])
    transactions = RecordedTransactions(producer, recorder, "tid", timeout_s=0.1)  # type: ignore[arg-type]
    transactions.begin()
    if commit_asked:
        transactions._commit_asked = True
    transactions.give_up(KafkaError(KafkaError._FATAL, "consumer died", fatal=True))
    recorder.close()
    rows = [e for e in read_history(tmp_path) if e.f == "txn"]
    assert _completion(rows) == (expected, "_FATAL") and not transactions.usable
