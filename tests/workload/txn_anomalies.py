"""KAFKA-17754's anomalies found in a transactional history, by a small analysis of its own —
the checker's transaction rules (HISTORY.md, "Transactions") are not on main yet, and the
scenario's test must say whether the bug showed. The definitions follow the contract's:

* a transaction *committed* when it completed ``ok``, or ``info`` and a read_committed poll
  outside it read one of its values;
* **aborted read** — a read_committed poll read a value of a transaction that completed
  ``fail`` (KAFKA-17754's signature); kept apart, a **failed send read** — any poll read a
  value whose send completed ``fail`` (the contract calls both aborted reads; this one says
  the client's ``fail`` was wrong about a send, not that a transaction was torn);
* **lost write** — an ``ok`` send (known offset) of a committed transaction that no
  read_committed poll read, while one read a later offset of its partition;
* **torn transaction** — a committed transaction some of whose ``ok`` sends were read by
  read_committed polls and another was not, although a later offset of its partition was.

Only read_committed polls outside the transaction count as reads here; a poll of a transaction
that did not commit does not count (its process may have read what it then rewound).
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from harness.history import Event, read_history

READ_COMMITTED = "read_committed"
SLOW_END_NS = 1_000_000_000


@dataclass
class TxnAnalysis:
    """Outcome counts of the transactions and the anomalies, each with its examples."""

    outcomes: Counter[str] = field(default_factory=Counter)
    aborted_reads: list[str] = field(default_factory=list)  # values
    failed_send_reads: list[str] = field(default_factory=list)  # values
    lost_writes: list[str] = field(default_factory=list)  # values
    torn: list[int] = field(default_factory=list)  # txn ops
    details: list[str] = field(default_factory=list)
    # Transactions that took longer than a client request timeout (1 s) from their last ok
    # send to their completion: a request of their end was retried, the chance a late copy
    # needs. A count of opportunities, not of late copies.
    slow_ends: int = 0

    @property
    def anomalous(self) -> bool:
        return bool(self.aborted_reads or self.lost_writes or self.torn)

    def summary(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items()))
        return (f"transactions: {counts}; ends slower than 1 s {self.slow_ends}; aborted reads "
                f"{len(self.aborted_reads)}, lost writes {len(self.lost_writes)}, torn "
                f"transactions {len(self.torn)}; failed sends read "
                f"{len(self.failed_send_reads)}")


def analyse(events: list[Event]) -> TxnAnalysis:
    outcome: dict[int, str] = {}
    for e in events:
        if e.f == "txn":
            if e.type == "invoke":
                outcome.setdefault(e.op, "none")
            else:
                outcome[e.op] = e.type
    sends: dict[str, Event] = {}  # value -> completion row
    for e in events:
        if e.f == "send" and e.type != "invoke" and e.value is not None:
            sends[e.value] = e
    rc_reads: dict[str, set[tuple[str, int, int]]] = defaultdict(set)
    any_reads: set[str] = set()
    rc_offsets: dict[tuple[str, int], int] = {}  # the highest offset read_committed read
    for e in events:
        if e.f != "poll" or e.type != "ok" or e.value is None:
            continue
        any_reads.add(e.value)
        if e.isolation != READ_COMMITTED:
            continue
        if e.txn is not None and outcome.get(e.txn) != "ok":
            continue  # read inside a transaction that did not commit
        assert e.topic is not None and e.offset is not None
        rc_reads[e.value].add((e.topic, e.partition, e.offset))
        key = (e.topic, e.partition)
        rc_offsets[key] = max(rc_offsets.get(key, -1), e.offset)
    committed = {op for op, o in outcome.items() if o == "ok"}
    committed |= {sends[v].txn for v in rc_reads
                  if v in sends and sends[v].txn is not None and outcome.get(sends[v].txn) ==
                  "info"}
    result = TxnAnalysis(Counter(outcome.values()))
    last_send: dict[int, int] = {}
    for e in events:
        if e.f == "send" and e.type == "ok" and e.txn is not None:
            last_send[e.txn] = max(last_send.get(e.txn, 0), e.time_ns)
    result.slow_ends = sum(1 for e in events if e.f == "txn" and e.type != "invoke"
                           and e.op in last_send and e.time_ns - last_send[e.op] > SLOW_END_NS)
    for value, send in sorted(sends.items()):
        if send.type == "fail" and value in any_reads:
            result.failed_send_reads.append(value)
            result.details.append(f"failed send read: {value} ({send.error}) of txn {send.txn} "
                                  f"({outcome.get(send.txn or -1)})")
        elif send.txn is not None and outcome.get(send.txn) == "fail" and value in rc_reads:
            result.aborted_reads.append(value)
            result.details.append(f"aborted read: {value} of txn {send.txn} (fail: "
                                  f"{_error(events, send.txn)}) at {send.topic}/"
                                  f"{send.partition}/{send.offset}")
    by_txn: dict[int, list[Event]] = defaultdict(list)
    for send in sends.values():
        if send.txn is not None and send.type == "ok" and send.offset is not None:
            by_txn[send.txn].append(send)
    for op in sorted(committed):
        read, missing = [], []
        for send in by_txn.get(op, []):
            assert send.topic is not None and send.offset is not None and send.value is not None
            if send.value in rc_reads:
                read.append(send)
            elif rc_offsets.get((send.topic, send.partition), -1) > send.offset:
                missing.append(send)
        for send in missing:
            assert send.value is not None
            result.lost_writes.append(send.value)
            result.details.append(f"lost write: {send.value} of txn {op} ({outcome[op]}) at "
                                  f"{send.topic}/{send.partition}/{send.offset}")
        if read and missing:
            result.torn.append(op)
    return result


def _error(events: list[Event], op: int) -> str | None:
    return next((e.error for e in events if e.f == "txn" and e.op == op and e.type != "invoke"),
                None)


def main(argv: list[str]) -> int:
    for run_dir in argv:
        analysis = analyse(read_history(Path(run_dir) / "history"))
        print(f"{run_dir}: {analysis.summary()}")
        for line in analysis.details[:20]:
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
