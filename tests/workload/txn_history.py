"""What a transactional workload's history must look like (HISTORY.md, "Transactions"), checked
row by row, independently of the checker: the tests of both transactional workloads share it.

Each function raises AssertionError naming the first row (or value) that breaks the shape.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from harness.history import Event

TXN_FUNCTIONS = ("send", "poll", "commit")


@dataclass(frozen=True)
class Transaction:
    op: int
    process: int
    txn_id: str
    outcome: str | None  # ok, fail, info; None: no completion row


def by_process(events: list[Event]) -> dict[int, list[Event]]:
    rows: dict[int, list[Event]] = defaultdict(list)
    for event in events:
        rows[event.process].append(event)
    return {process: sorted(found, key=lambda e: e.seq) for process, found in rows.items()}


def transactions(events: list[Event]) -> dict[int, Transaction]:
    """Every txn operation: one invoke row naming its transactional.id, at most one completion
    row, in the same process."""
    invokes = [e for e in events if e.f == "txn" and e.type == "invoke"]
    completions = [e for e in events if e.f == "txn" and e.type != "invoke"]
    assert Counter(e.op for e in invokes).most_common(1)[0][1] == 1, "a txn op invoked twice"
    assert len({e.op for e in completions}) == len(completions), "a txn with two completions"
    found = {}
    for invoke in invokes:
        assert invoke.value, f"txn invoke without its transactional.id: {invoke}"
        found[invoke.op] = Transaction(invoke.op, invoke.process, invoke.value, None)
    for done in completions:
        begun = found.get(done.op)
        assert begun is not None, f"txn completion without invoke: {done}"
        assert done.process == begun.process and done.value == begun.txn_id, done
        assert done.type in ("ok", "fail", "info"), done
        found[done.op] = Transaction(done.op, done.process, begun.txn_id, done.type)
    return found


def check_txn_columns(events: list[Event], txns: dict[int, Transaction],
                      transactional_roles: set[int]) -> None:
    """Inside a transactional client's transaction (between its txn invoke and completion rows,
    by seq) every send, poll and commit row carries that transaction's op; outside one, none
    does; rows of other processes never carry a txn."""
    for process, rows in by_process(events).items():
        open_txn: int | None = None
        for row in rows:
            if row.f == "txn":
                open_txn = row.op if row.type == "invoke" else None
                continue
            if row.f not in TXN_FUNCTIONS:
                assert row.txn is None, f"a {row.f} row carries a txn: {row}"
                continue
            if process not in transactional_roles:
                assert row.txn is None, f"a row of a non-transactional client has a txn: {row}"
                continue
            assert row.txn == open_txn, f"row's txn {row.txn}, open transaction {open_txn}: {row}"
            if row.txn is not None:
                assert txns[row.txn].process == process, row


def check_isolation(events: list[Event]) -> None:
    polls = [e for e in events if e.f == "poll"]
    assert polls, "nothing was polled"
    missing = [e for e in polls if e.isolation not in ("read_committed", "read_uncommitted")]
    assert not missing, f"poll rows without an isolation: {missing[:3]}"


def send_outcomes(events: list[Event]) -> dict[str, Event]:
    """Each send value's completion row."""
    return {e.value: e for e in events if e.f == "send" and e.type != "invoke" and e.value}


def committed_and_aborted(events: list[Event], txns: dict[int, Transaction]
                          ) -> tuple[set[str], set[str]]:
    """(values whose send is ok and whose transaction, if any, committed ``ok``; values of a
    transaction that completed ``fail``)."""
    committed, aborted = set(), set()
    for value, done in send_outcomes(events).items():
        outcome = txns[done.txn].outcome if done.txn is not None else "ok"
        if done.type == "ok" and outcome == "ok":
            committed.add(value)
        elif outcome == "fail" or done.type == "fail":
            aborted.add(value)
    return committed, aborted


def check_no_aborted_read(events: list[Event], aborted: set[str]) -> None:
    read = {e.value for e in events
            if e.f == "poll" and e.type == "ok" and e.isolation == "read_committed"}
    assert not read & aborted, \
        f"read_committed polls read aborted values: {sorted(read & aborted)[:5]}"


def final_reads(events: list[Event], first_final_process: int) -> Counter[str]:
    """How often the final read (the processes from ``first_final_process`` on) read each value;
    asserts it read read_committed."""
    rows = [e for e in events if e.process >= first_final_process and e.f == "poll"
            and e.type == "ok"]
    assert rows and all(e.isolation == "read_committed" for e in rows), "final read not committed"
    assert all(e.group is None for e in rows)
    return Counter(e.value for e in rows if e.value is not None)


def check_final_read_exactly_once(events: list[Event], first_final_process: int,
                                  committed: set[str], aborted: set[str]) -> None:
    read = final_reads(events, first_final_process)
    twice = [v for v, n in read.items() if n > 1]
    assert not twice, f"the final read read values twice: {twice[:5]}"
    missing = committed - set(read)
    assert not missing, f"committed values the final read missed: {sorted(missing)[:5]}"
    assert not set(read) & aborted, f"the final read read aborted values: " \
                                    f"{sorted(set(read) & aborted)[:5]}"
