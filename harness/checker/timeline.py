"""The report's throughput and latency timeline, computed in plain Python from the history's rows.

The Spark engine computes the same buckets in SQL (harness.checker.sql.timeline, run by
harness.checker.plots); this is the timeline of runs checked with ``--engine python``, whose
reports would otherwise have no throughput or latency chart to shade the fault windows on. Both
use :func:`bucket_width`, and tests/checker/test_report_contents.py holds them to the same
buckets. Likewise the transactions' outcomes over time and the rows of the transactions behind
the examples, for a history with transactions (sql.txn_timeline and sql.txn_rows on Spark;
tests/checker/test_report_txn.py holds the two alike).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from harness.checker.result import ROWS_PER_TXN, TimelineBucket, TxnBucket
from harness.checker.rules_txn import TXN, Outcome, Transactions
from harness.history import Event

BUCKETS = 120  # how many time buckets a timeline has at most
P99 = 0.99


def bucket_width(first_ns: int, last_ns: int, buckets: int = BUCKETS) -> int:
    """Nanoseconds per bucket, so that [first_ns, last_ns] fits in ``buckets`` buckets."""
    return max(1, math.ceil((last_ns - first_ns + 1) / buckets))


def _percentile(values: list[float], fraction: float) -> float:
    """The smallest value with at least ``fraction`` of the values at or below it (what Spark's
    percentile_approx gives when it holds every value)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def timeline(events: Iterable[Event], first_ns: int, width: int) -> list[TimelineBucket]:
    """Per bucket with any row: sends acknowledged, sends failed or unknown, records read, and
    the mean and p99 latency (ms) of the sends acknowledged in it, from invoke to ok."""
    counts: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    invoked: dict[int, int] = {}
    acked: dict[int, int] = {}
    for e in events:
        bucket = (e.time_ns - first_ns) // width
        count = counts[bucket]
        if e.f == "send":
            if e.type == "ok":
                count[0] += 1
                acked[e.op] = max(acked.get(e.op, e.time_ns), e.time_ns)
            elif e.type in ("fail", "info"):
                count[1] += 1
            else:
                invoked[e.op] = min(invoked.get(e.op, e.time_ns), e.time_ns)
        elif e.f == "poll" and e.type == "ok":
            count[2] += 1
    latencies: dict[int, list[float]] = defaultdict(list)
    for op, done in acked.items():
        if op in invoked:
            latencies[(done - first_ns) // width].append((done - invoked[op]) / 1e6)
    out = []
    for bucket in sorted(counts):
        sends_ok, failed, reads = counts[bucket]
        spans = latencies.get(bucket)
        mean = sum(spans) / len(spans) if spans else None
        p99 = _percentile(spans, P99) if spans else None
        out.append(TimelineBucket(first_ns + bucket * width, sends_ok, failed, reads, mean, p99))
    return out


def txn_timeline(events: Sequence[Event], first_ns: int, width: int) -> list[TxnBucket]:
    """Per bucket with any: the transactions that began (an invoke row) and ended in it — at
    their completion row, or at their invoke row when they have none — committed, aborted and
    unknown as the Terms say (rules_txn.Transactions), so the buckets add up to the stats."""
    txns = Transactions(events)
    begun = {e.op: e.time_ns for e in events if e.f == TXN and e.type == "invoke"}
    counts: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    for txn, started in begun.items():
        end = txns.ends.get(txn)
        ended = started if end is None else end.time_ns
        kind = 0 if txn in txns.committed else 1 if txns.outcome(txn) is Outcome.FAIL else 2
        counts[(ended - first_ns) // width][kind] += 1
    return [TxnBucket(first_ns + b * width, *counts[b]) for b in sorted(counts)]


def txn_rows(events: Iterable[Event], wanted: Iterable[int]) -> dict[int, list[dict[str, Any]]]:
    """Per wanted transaction: its own rows (f=txn, op = it) and the rows made inside it (txn =
    it), by time_ns, process, seq, at most ROWS_PER_TXN + 1."""
    want = set(wanted)
    found: dict[int, list[Event]] = defaultdict(list)
    for e in events:
        txn = e.op if e.f == TXN and e.op in want else e.txn
        if txn in want:
            found[txn].append(e)
    return {
        txn: [e.as_dict() for e in sorted(rows, key=lambda e: (e.time_ns, e.process, e.seq))
              ][:ROWS_PER_TXN + 1]
        for txn, rows in sorted(found.items())
    }
