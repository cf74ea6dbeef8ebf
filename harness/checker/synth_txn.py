"""Synthetic transactional histories of any size, transaction anomalies planted at known rates.

The transactional twin of harness.checker.synth (same clock, nemesis and Parquet writing): the
shape the transactions workload writes (docs/workloads.md), made a chunk at a time with Arrow
compute so that memory stays flat from 1M to 10M rows, with every transaction anomaly of
docs/history.md ("Transactions") planted so that the generator knows the exact counts a correct
checker reports. The benchmark judges it to measure what transactions cost (ci/bench_checker.py
--transactional); the tests hold both engines to its counts.

Layout. Transaction k (k = 0..K-1, one a millisecond) is made by producer 1 + k % PRODUCERS: it
begins (an f=txn invoke), sends one record to each of the P partitions of topic "t" — value
"x{k}-{p}", at offset 2k (odd offsets hold the commit and abort markers) — and commits, or
aborts when k % 10 == 7 (a tenth: ABORTED). One read_committed consumer of group "g" per
partition reads every committed record in order, 64 transactions a poll, committing after each
poll; aborted records are skipped, as Kafka's read_committed consumer skips them. Plants go to
transactions k % 64 == 8 (never aborted, one per poll), and each adds fresh processes of its own
where it needs any, so no plant touches another:

- aborted_read: transaction k aborts, yet partition 0's consumer reads its record (G1a); the
  other partitions' consumers skip it. aborted_read +1.
- torn_transaction: partition 1's consumer skips k's record and reads on: the committed k is
  seen in part. torn_transaction +1, and, that record being committed and unread below a read
  offset, lost_write +1 and poll_skip +1.
- g1c: transactions k and k+1 each read the other's partition-0 record (a read_committed poll
  inside each, by a process of its own, once both transactions' sends completed; both commit
  after it). g1c +1.
- precommitted_read: a read_committed poll inside transaction k reads k's own partition-2
  record. precommitted_read +1.
- double_processed: a processor of group "gp" reads input "in{k}" (topic "ctp-in", a partition
  of its own) inside transaction k and sends two outputs derived from it (topic "ctp-out"),
  which a reader reads. double_processed +1.
- unprocessed: the processor reads inputs "ua{k}" and "ub{k}" (offsets 0 and 1) inside k and
  sends one output, derived from ub{k}: ua{k} sits below a processed input. unprocessed +1.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from harness.checker.result import ANOMALIES
from harness.checker.synth import (
    POLL,
    SLOT,
    Synthesized,
    check_rates,
    columns,
    nemesis_rows,
    write_part,
)
from harness.history import COLUMN_NAMES, EVENT_SCHEMA, READ_COMMITTED

PLANTED = ("aborted_read", "torn_transaction", "g1c", "precommitted_read", "double_processed",
           "unprocessed")
PRODUCERS = 4
ABORTED = 10  # transaction k aborts on purpose when k % ABORTED == 7
_MS = 1_000_000
_TXN, _SEND, _POLL, _COMMIT, _ASSIGN, _PLANT = (i * 10**13 for i in range(1, 7))
_PLANT_PROCESS = 1_000  # plant processes: _PLANT_PROCESS + 8k + role
_END = 900_000  # a transaction ends 0.9 ms after it began; its sends are done by 0.4 ms
_READ = 2 * _MS  # a consumer reads transaction k's records 2 ms after k began


@dataclass
class TxnSpec:
    rows: int  # about this many rows in total
    partitions: int = 8
    rates: dict[str, float] = field(default_factory=dict)  # plants per transaction, by anomaly
    seed: int = 0

    def __post_init__(self) -> None:
        check_rates(self.rates, PLANTED, "transaction")
        if self.partitions < 3:
            raise ValueError("the plants need partitions 0, 1 and 2")

    @property
    def rows_per_txn(self) -> float:
        """Begin and end, a send (2 rows) and about 0.9 of a read per partition, and a poll's
        invoke and commit per 64 transactions per partition."""
        p = self.partitions
        return 2 + 2 * p + p * (ABORTED - 1) / ABORTED + 2 * p / POLL


def _stride(partitions: int) -> int:
    return 2 * partitions + 2  # a producer's seqs per transaction: begin, sends, end


def _columns(size: int, defaults: dict[str, Any], **values: Any) -> pa.Table:
    return columns(size, defaults, EVENT_SCHEMA, **values)


def _mod(values: pa.Array, divisor: int) -> pa.Array:
    return pc.subtract(values, pc.multiply(pc.divide(values, divisor), divisor))


def _aborted(k: pa.Array) -> pa.Array:
    """The transactions aborted on purpose: k % 10 == 7, save plant slots (k % 64 is 8 or 9)."""
    slot = _mod(k, POLL)
    return pc.and_(pc.equal(_mod(k, ABORTED), 7),
                   pc.invert(pc.or_(pc.equal(slot, SLOT), pc.equal(slot, SLOT + 1))))


class _Chunk:
    """Rows for transactions [k0, k1): base rows column-wise, plant rows one by one."""

    def __init__(self, spec: TxnSpec, total: int, k0: int, k1: int) -> None:
        self.p, self.total, self.k0, self.k1 = spec.partitions, total, k0, k1
        self.no_end: set[int] = set()  # transactions whose end row a plant writes
        self.no_read: dict[int, set[int]] = defaultdict(set)  # partition → k not read there
        self.plants: list[dict[str, Any]] = []

    def row(self, **values: Any) -> dict[str, Any]:
        base: dict[str, Any] = dict.fromkeys(COLUMN_NAMES)
        base.update(run_id="synth", partition=-1, generation=-1)
        base.update(values)
        return base

    def producer(self, k: int) -> int:
        return 1 + k % PRODUCERS

    def end_row(self, k: int, outcome: str, time_ns: int) -> dict[str, Any]:
        seq = (k // PRODUCERS) * _stride(self.p) + _stride(self.p) - 1
        return self.row(process=self.producer(k), seq=seq, op=_TXN + k, time_ns=time_ns,
                        type=outcome, f="txn",
                        error="TRANSACTION_ABORTED" if outcome == "fail" else None)

    def poll_rows(self, process: int, op: int, time_ns: int, records: list[tuple[Any, ...]],
                  **common: Any) -> list[dict[str, Any]]:
        """A read_committed poll: its invoke and one ok row per (topic, partition, offset,
        value), the process's seqs from 0."""
        common = {"process": process, "op": op, "f": "poll", "isolation": READ_COMMITTED,
                  **common}
        rows = [self.row(seq=0, time_ns=time_ns, type="invoke", **common)]
        for i, (topic, partition, offset, value) in enumerate(records, 1):
            rows.append(self.row(seq=i, time_ns=time_ns + i, type="ok", topic=topic,
                                 partition=partition, offset=offset, value=value, **common))
        return rows

    def send_rows(self, process: int, seq: int, op: int, time_ns: int, topic: str,
                  partition: int, offset: int, value: str, **common: Any) -> list[dict]:
        where = {"topic": topic, "process": process, "op": op, "f": "send", "value": value,
                 **common}
        return [self.row(seq=seq, time_ns=time_ns, type="invoke", **where),
                self.row(seq=seq + 1, time_ns=time_ns + 50_000, type="ok", partition=partition,
                         offset=offset, **where)]

    def plant(self, kind: str, k: int) -> None:
        txn, process, op = _TXN + k, _PLANT_PROCESS + 8 * k, _PLANT + 16 * k
        at = k * _MS
        if kind == "aborted_read":
            self.no_end.add(k)
            self.plants.append(self.end_row(k, "fail", at + _END))
            for p in range(1, self.p):
                self.no_read[p].add(k)
            # Partition 0's consumer reads it anyway: the base read stays.
        elif kind == "torn_transaction":
            self.no_read[1].add(k)
        elif kind == "g1c":
            when = at + _MS + 950_000  # after k+1's sends completed, before either ends
            for reader, writer, role in ((k, k + 1, 1), (k + 1, k, 2)):
                self.plants += self.poll_rows(process + role, op + role, when,
                                              [("t", 0, 2 * writer, f"x{writer}-0")],
                                              txn=_TXN + reader)
            for t in (k, k + 1):
                self.no_end.add(t)
                self.plants.append(self.end_row(t, "ok", at + _MS + 990_000))
        elif kind == "precommitted_read":
            self.plants += self.poll_rows(process, op, at + 500_000,
                                          [("t", 2, 2 * k, f"x{k}-2")], txn=txn)
        else:  # double_processed or unprocessed: consume-transform-produce inside k
            inputs = [f"in{k}"] if kind == "double_processed" else [f"ua{k}", f"ub{k}"]
            for i, value in enumerate(inputs):
                self.plants += self.send_rows(process + 3, 2 * i, op + 3 + i, at - _MS + i,
                                              "ctp-in", k, i, value)
            self.plants += self.poll_rows(
                process + 4, op + 5, at + 410_000,
                [("ctp-in", k, i, value) for i, value in enumerate(inputs)],
                group="gp", generation=1, txn=txn)
            made = [(f"out{k}-a", inputs[0]), (f"out{k}-b", inputs[0])] \
                if kind == "double_processed" else [(f"out{k}", inputs[1])]
            for i, (value, source) in enumerate(made):
                self.plants += self.send_rows(
                    process + 5, 2 * i, op + 6 + i, at + 500_000 + 100_000 * i, "ctp-out", k, i,
                    value, txn=txn, group="gp", derived_from=source)
            self.plants += self.poll_rows(
                process + 6, op + 9, at + _READ,
                [("ctp-out", k, i, value) for i, (value, _) in enumerate(made)])

    def base(self) -> pa.Table:
        k = pa.array(range(self.k0, self.k1), pa.int64())
        p_count, stride = self.p, _stride(self.p)
        producer = pc.add(_mod(k, PRODUCERS), 1)
        first_seq = pc.multiply(pc.divide(k, PRODUCERS), stride)
        txn = pc.add(k, _TXN)
        start = pc.multiply(k, _MS)
        parts = [_columns(len(k), {}, process=producer, seq=first_seq, op=txn, time_ns=start,
                         type="invoke", f="txn",
                         value=pc.binary_join_element_wise("tx-", pc.cast(producer, pa.string()),
                                                           ""))]
        ends = k.filter(pc.invert(pc.is_in(k, pa.array(sorted(self.no_end), pa.int64()))))
        parts.append(_columns(
            len(ends), {}, process=pc.add(_mod(ends, PRODUCERS), 1),
            seq=pc.add(pc.multiply(pc.divide(ends, PRODUCERS), stride), stride - 1),
            op=pc.add(ends, _TXN), time_ns=pc.add(pc.multiply(ends, _MS), _END),
            type=pc.if_else(_aborted(ends), "fail", "ok"), f="txn",
            error=pc.if_else(_aborted(ends), "TRANSACTION_ABORTED", pa.scalar(None, pa.string())),
        ))
        committed = pc.invert(_aborted(k))
        for p in range(p_count):
            values = pc.binary_join_element_wise("x", pc.cast(k, pa.string()), f"-{p}", "")
            sent = pc.add(start, 1_000 + 20_000 * p)
            jitter = pc.multiply(_mod(pc.add(pc.multiply(k, 7919), 104729 * p), 100), 1_000)
            common = {"process": producer, "op": pc.add(pc.multiply(k, p_count), _SEND + p),
                      "f": "send", "value": values, "txn": txn}
            parts.append(_columns(len(k), {"topic": "t"}, seq=pc.add(first_seq, 1 + 2 * p),
                                 time_ns=sent, type="invoke", **common))
            parts.append(_columns(len(k), {"topic": "t", "partition": p},
                                 seq=pc.add(first_seq, 2 + 2 * p),
                                 time_ns=pc.add(sent, pc.add(jitter, 50_000)), type="ok",
                                 offset=pc.multiply(k, 2), **common))
            parts.append(self._reads(p, k, committed, values))
        return pa.concat_tables(parts)

    def _reads(self, p: int, k: pa.Array, committed: pa.Array, values: pa.Array) -> pa.Table:
        """Partition p's consumer: its polls (invoke, reads, commit) of [k0, k1)."""
        skip = pa.array(sorted(self.no_read.get(p, ())), pa.int64())
        keep = pc.and_(committed, pc.invert(pc.is_in(k, skip)))
        read = k.filter(keep)
        group = {"process": 1 + PRODUCERS + p, "group": "g", "member": f"m{p}", "generation": 1}
        tables = [_columns(len(read), {"topic": "t", "partition": p},
                          seq=pc.add(pc.multiply(read, 3), 2),
                          op=pc.add(pc.multiply(pc.divide(read, POLL), self.p), _POLL + p),
                          time_ns=pc.add(pc.multiply(read, _MS), _READ + p), type="ok", f="poll",
                          offset=pc.multiply(read, 2), value=values.filter(keep),
                          isolation=READ_COMMITTED, **group)]
        polls = list(range(-(-self.k0 // POLL), -(-self.k1 // POLL)))
        last = [min((b + 1) * POLL, self.total) - 1 for b in polls]
        tables.append(_columns(len(polls), {}, seq=[3 * POLL * b + 1 for b in polls],
                              op=[_POLL + b * self.p + p for b in polls],
                              time_ns=[b * POLL * _MS + _READ - 1 for b in polls],
                              type="invoke", f="poll", isolation=READ_COMMITTED, **group))
        tables.append(_columns(len(polls), {"topic": "t", "partition": p},
                              seq=[3 * m + 3 for m in last],
                              op=[_COMMIT + b * self.p + p for b in polls],
                              time_ns=[m * _MS + _READ + 500_000 for m in last], type="ok",
                              f="commit", offset=[2 * m + 2 for m in last], **group))
        if self.k0 == 0:
            tables.append(_columns(1, {"topic": "t", "partition": p}, seq=0, op=_ASSIGN + p,
                                  time_ns=0, type="ok", f="assign", **group))
        return pa.concat_tables(tables)


def generate(directory: str | Path, spec: TxnSpec, *, chunk: int = 1 << 16) -> Synthesized:
    """Write spec's history as Parquet files in `directory`, `chunk` transactions a file (a
    multiple of the poll size), and return the counts a correct checker reports."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    chunk = max(POLL, chunk // POLL * POLL)
    total = max(4 * POLL, round(spec.rows / spec.rows_per_txn / POLL) * POLL)
    expected = dict.fromkeys(ANOMALIES, 0)
    rows, files = 0, []
    kinds = sorted(spec.rates)
    for index, k0 in enumerate(range(0, total, chunk)):
        k1 = min(total, k0 + chunk)
        part = _Chunk(spec, total, k0, k1)
        rng = random.Random(f"{spec.seed}/txn/{k0}")
        for k in range(max(k0 - k0 % POLL + SLOT, POLL + SLOT), min(k1, total - POLL), POLL):
            draw, edge = rng.random(), 0.0
            for kind in kinds:
                edge += spec.rates[kind] * POLL
                if draw < edge:
                    part.plant(kind, k)
                    expected[kind] += 1
                    break
        tables = [pa.Table.from_pylist(nemesis_rows(k0, k1), EVENT_SCHEMA), part.base()]
        if part.plants:
            tables.append(pa.Table.from_pylist(part.plants, EVENT_SCHEMA))
        path, written = write_part(root, index, tables)
        rows += written
        files.append(path)
    expected["lost_write"] += expected["torn_transaction"]
    expected["poll_skip"] += expected["torn_transaction"]
    return Synthesized(rows, files, expected)
