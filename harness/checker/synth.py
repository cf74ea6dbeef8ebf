"""Synthetic histories of any size with anomalies planted at known rates, for tests and benchmarks.

The history has the shape a workload writes (producers acking, one group consumer per partition
polling batches and committing, a nemesis opening and healing faults) and every anomaly of
docs/history.md planted on purpose, each in a way whose effect on every rule is worked out below,
so the generator knows the exact counts a correct checker must report. Rows are built a chunk at a
time with Arrow compute and written as Parquet, so memory stays flat from 1M to 100M rows.

Layout: partition p of topic "t" has messages n = 0..M-1; message n sits at offset 2n (odd offsets
stay free, as a transactional topic's markers would leave them, for the plants that need a spare
slot); its value is "p{p}-{n}". Plants only go to slots n % 64 == 8, one slot per 64-record poll,
so no two plants interact. What each plant does, and what the checker must count:

- lost_write: the consumer skips n's record. lost_write +1, and poll_skip +1 (its reads jump over
  offset 2n, which the send's ack makes observed).
- poll_skip: the consumer skips n's record, a separate reader (no group) reads it. poll_skip +1.
- duplicate: the log holds the value at 2n and 2n+1, the consumer reads both. duplicate +1.
- inconsistent_offset: n's ack names 2n-2, where n-1's value is. inconsistent_offset +1 and
  duplicate +1 (n's value is then observed at 2n-2 and 2n).
- aborted_read: n's send completes fail, yet the consumer reads it. aborted_read +1.
- phantom_read: the consumer also reads a value nobody sent, at 2n+1. phantom_read +1.
- nonmonotonic_send: n and n+1 land in the log swapped, acks saying so. nonmonotonic_send +1.
- nonmonotonic_poll: the consumer re-reads n-1 and n inside the same poll. nonmonotonic_poll +1.
- commit_regression: the consumer commits offset 0 mid-poll. commit_regression +1.
- group_exclusivity: another process of the group, same generation, reads n while the
  partition's own consumer reads on (their reads interleave). group_exclusivity +1 per
  partition with such a plant, redelivery +1 per plant.
- redelivery: a process of the group in a later generation reads n again. redelivery +1.
- unseen: the last `unseen` fraction of each partition is never read. unseen +1 per message.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from harness.checker.result import ANOMALIES, TRANSACTION_ANOMALIES
from harness.history import ARROW_SCHEMA, COLUMN_NAMES, ParquetHistoryWriter

POLL = 64  # records per poll; plants sit one per poll, at n % POLL == SLOT
SLOT = 8
# Transactions are not planted here (harness.checker.synth_txn plants them): their anomalies
# count 0 in these histories, as a correct checker finds.
PLANTED = tuple(a for a in ANOMALIES if a != "unseen" and a not in TRANSACTION_ANOMALIES)
_MS = 1_000_000
_SEND, _POLL, _COMMIT, _ASSIGN, _EXTRA, _NEMESIS = (i * 10**13 for i in range(6))
_CYCLE = 10_000  # messages per nemesis cycle (10 s): fault from 3 s to 6 s, then heal
ROWS_PER_MESSAGE = 2 + 1 + 2 / POLL  # send invoke + ok, one read, a poll invoke and commit per poll


@dataclass
class Spec:
    rows: int  # about this many rows in total
    partitions: int = 8
    rates: dict[str, float] = field(default_factory=dict)  # plants per message, by anomaly name
    unseen: float = 0.0  # fraction of each partition left unread at the end
    seed: int = 0

    def __post_init__(self) -> None:
        check_rates(self.rates, PLANTED, "message")


def check_rates(rates: dict[str, float], plantable: tuple[str, ...], per: str) -> None:
    """Plants sit one per poll at most, so their rates (per `per`) sum to at most 1/POLL."""
    unknown = set(rates) - set(plantable)
    if unknown:
        raise ValueError(f"cannot plant {sorted(unknown)}; plantable: {', '.join(plantable)}")
    if sum(rates.values()) * POLL > 1:
        raise ValueError(f"plant rates must sum to at most {1 / POLL:.4f} per {per}")


@dataclass
class Synthesized:
    rows: int
    files: list[Path]
    expected: dict[str, int]  # the counts a correct checker reports


def _mod(values: pa.Array, divisor: int) -> pa.Array:
    return pc.subtract(values, pc.multiply(pc.divide(values, divisor), divisor))


class _Partition:
    """Row builders for one partition: base rows vectorised, plant rows one by one."""

    def __init__(self, p: int, spec: Spec, messages: int, readable: int) -> None:
        self.p, self.k, self.messages, self.readable = p, spec.partitions, messages, readable
        self.producer, self.consumer = 1 + p, 1 + spec.partitions + p

    def send_time(self, n: Any) -> Any:
        return (
            n * _MS + self.p * 1000
            if isinstance(n, int)
            else pc.add(pc.multiply(n, _MS), self.p * 1000)
        )

    def latency(self, n: int) -> int:
        jitter = (n * 7919 + self.p * 104729) % 3000 * 1000
        faulty = 3 * _CYCLE // 10 <= n % _CYCLE < 6 * _CYCLE // 10
        return 2 * _MS + jitter + (40 * _MS if faulty else 0)

    def latencies(self, n: pa.Array) -> pa.Array:
        jitter = pc.multiply(_mod(pc.add(pc.multiply(n, 7919), self.p * 104729), 3000), 1000)
        phase = _mod(n, _CYCLE)
        faulty = pc.and_(
            pc.greater_equal(phase, 3 * _CYCLE // 10), pc.less(phase, 6 * _CYCLE // 10)
        )
        return pc.add(pc.add(jitter, 2 * _MS), pc.if_else(faulty, 40 * _MS, 0))

    def value(self, n: int) -> str:
        return f"p{self.p}-{n}"

    def values(self, n: pa.Array) -> pa.Array:
        return pc.binary_join_element_wise(f"p{self.p}-", pc.cast(n, pa.string()), "")

    @staticmethod
    def read_time(send_time: Any) -> Any:
        return send_time + 50 * _MS if isinstance(send_time, int) else pc.add(send_time, 50 * _MS)

    def row(self, **values: Any) -> dict[str, Any]:
        base: dict[str, Any] = {name: None for name in COLUMN_NAMES}
        base.update(run_id="synth", topic="t", partition=self.p, generation=-1)
        base.update(values)
        return base

    def group_row(self, **values: Any) -> dict[str, Any]:
        return self.row(
            process=self.consumer, group="g", member=f"m{self.p}", generation=1, **values
        )

    def send_rows(self, n: int, outcome: str, offset: int | None, value: str) -> list[dict]:
        op, start = _SEND + n * self.k + self.p, self.send_time(n)
        done = {"type": outcome, "offset": offset}
        if outcome != "ok":
            done["error"] = "NOT_ENOUGH_REPLICAS"
        return [
            self.row(
                process=self.producer,
                seq=2 * n,
                op=op,
                time_ns=start,
                type="invoke",
                f="send",
                value=value,
            ),
            self.row(
                process=self.producer,
                seq=2 * n + 1,
                op=op,
                time_ns=start + self.latency(n),
                f="send",
                value=value,
                **done,
            ),
        ]

    def read_row(self, n: int, slot: int, offset: int, value: str) -> dict[str, Any]:
        """A record read by the group consumer, in the poll that covers message n."""
        return self.group_row(
            seq=5 * n + slot,
            op=_POLL + (n // POLL) * self.k + self.p,
            time_ns=self.read_time(self.send_time(n)) + slot,
            type="ok",
            f="poll",
            offset=offset,
            value=value,
        )

    def visit(self, process: int, n: int, generation: int, group: str | None) -> list[dict]:
        """Another process reads n's record in a run of its own: assign, poll, revoke."""
        base = _EXTRA + (n * self.k + self.p) * 8
        when = self.read_time(self.send_time(n)) + 5 * _MS
        common = {"process": process, "group": group, "generation": generation}
        return [
            self.row(seq=4 * n, op=base, time_ns=when, type="ok", f="assign", **common),
            self.row(
                seq=4 * n + 1,
                op=base + 1,
                time_ns=when + 1,
                type="invoke",
                f="poll",
                topic=None,
                partition=-1,
                **common,
            ),
            self.row(
                seq=4 * n + 2,
                op=base + 1,
                time_ns=when + 2,
                type="ok",
                f="poll",
                offset=2 * n,
                value=self.value(n),
                **common,
            ),
            self.row(seq=4 * n + 3, op=base + 2, time_ns=when + 3, type="ok", f="revoke", **common),
        ]

    def plant(self, kind: str, n: int) -> tuple[list[dict], set[int], set[int]]:
        """Rows for one plant, and the messages whose base send / base read rows it replaces."""
        v = self.value(n)
        if kind == "lost_write":
            return [], set(), {n}
        if kind == "poll_skip":
            return self.visit(1 + 2 * self.k + self.p, n, -1, None), set(), {n}
        if kind == "duplicate":
            return [self.read_row(n, 3, 2 * n + 1, v)], set(), set()
        if kind == "inconsistent_offset":
            return self.send_rows(n, "ok", 2 * n - 2, v), {n}, set()
        if kind == "aborted_read":
            return self.send_rows(n, "fail", None, v), {n}, set()
        if kind == "phantom_read":
            return [self.read_row(n, 3, 2 * n + 1, f"phantom-{self.p}-{n}")], set(), set()
        if kind == "nonmonotonic_send":
            w = self.value(n + 1)
            rows = self.send_rows(n, "ok", 2 * n + 2, v) + self.send_rows(n + 1, "ok", 2 * n, w)
            rows += [self.read_row(n, 2, 2 * n, w), self.read_row(n + 1, 2, 2 * n + 2, v)]
            return rows, {n, n + 1}, {n, n + 1}
        if kind == "nonmonotonic_poll":
            rows = [
                self.read_row(n, 3, 2 * n - 2, self.value(n - 1)),
                self.read_row(n, 4, 2 * n, v),
            ]
            return rows, set(), set()
        if kind == "commit_regression":
            when = self.read_time(self.send_time(n)) + 10
            return (
                [
                    self.group_row(
                        seq=5 * n + 5,
                        op=_EXTRA + (n * self.k + self.p) * 8,
                        time_ns=when,
                        type="ok",
                        f="commit",
                        offset=0,
                    )
                ],
                set(),
                set(),
            )
        if kind == "group_exclusivity":
            return self.visit(1 + 3 * self.k + self.p, n, 1, "g"), set(), set()
        return self.visit(1 + 4 * self.k + self.p, n, 2, "g"), set(), set()  # redelivery

    def base(self, n0: int, n1: int, no_send: set[int], no_read: set[int]) -> pa.Table:
        """Every row of messages [n0, n1) a plant does not replace, built column-wise."""
        parts = []
        n = pa.array(range(n0, n1), pa.int64())
        sent = pc.invert(pc.is_in(n, pa.array(sorted(no_send), pa.int64())))
        ns = n.filter(sent)
        start = self.send_time(ns)
        op = pc.add(pc.multiply(ns, self.k), _SEND + self.p)
        for outcome, seq, time_ns, offset in (
            ("invoke", pc.multiply(ns, 2), start, None),
            (
                "ok",
                pc.add(pc.multiply(ns, 2), 1),
                pc.add(start, self.latencies(ns)),
                pc.multiply(ns, 2),
            ),
        ):
            parts.append(
                self._columns(
                    len(ns),
                    process=self.producer,
                    seq=seq,
                    op=op,
                    time_ns=time_ns,
                    type=outcome,
                    f="send",
                    offset=offset,
                    value=self.values(ns),
                )
            )
        readable = pa.array(range(n0, min(n1, self.readable)), pa.int64())
        nr = readable.filter(pc.invert(pc.is_in(readable, pa.array(sorted(no_read), pa.int64()))))
        group = {"group": "g", "member": f"m{self.p}", "generation": 1, "process": self.consumer}
        parts.append(
            self._columns(
                len(nr),
                seq=pc.add(pc.multiply(nr, 5), 2),
                op=pc.add(pc.multiply(pc.divide(nr, POLL), self.k), _POLL + self.p),
                time_ns=pc.add(self.read_time(self.send_time(nr)), 2),
                type="ok",
                f="poll",
                offset=pc.multiply(nr, 2),
                value=self.values(nr),
                **group,
            )
        )
        polls = list(range(-(-n0 // POLL), -(-min(n1, self.readable) // POLL)))
        last = [min((k + 1) * POLL, self.readable) - 1 for k in polls]
        parts.append(
            self._columns(
                len(polls),
                seq=[5 * k * POLL + 1 for k in polls],
                op=[_POLL + k * self.k + self.p for k in polls],
                time_ns=[self.read_time(self.send_time(k * POLL)) for k in polls],
                type="invoke",
                f="poll",
                topic=None,
                partition=-1,
                **group,
            )
        )
        parts.append(
            self._columns(
                len(polls),
                seq=[5 * (k + 1) * POLL for k in polls],
                op=[_COMMIT + k * self.k + self.p for k in polls],
                time_ns=[self.read_time(self.send_time(m)) + 10 for m in last],
                type="ok",
                f="commit",
                offset=[2 * m + 1 for m in last],
                **group,
            )
        )
        if n0 == 0:
            parts.append(
                pa.Table.from_pylist(
                    [self.group_row(seq=0, op=_ASSIGN + self.p, time_ns=0, type="ok", f="assign")],
                    ARROW_SCHEMA,
                )
            )
        return pa.concat_tables(parts)

    def _columns(self, size: int, **values: Any) -> pa.Table:
        return columns(size, {"topic": "t", "partition": self.p}, **values)


def columns(size: int, defaults: dict[str, Any], schema: pa.Schema = ARROW_SCHEMA,
            **values: Any) -> pa.Table:
    """`size` history rows as Arrow columns of `schema`: each column a value repeated, an
    array, or a list, from `values`, else from `defaults`, else null (run_id is "synth",
    generation and partition -1)."""
    defaults = {"run_id": "synth", "generation": -1, "partition": -1, **defaults}
    arrays = []
    for spec in schema:
        value = values.get(spec.name, defaults.get(spec.name))
        if value is None:
            arrays.append(pa.nulls(size, spec.type))
        elif isinstance(value, (str, int)):
            arrays.append(pa.repeat(pa.scalar(value, spec.type), size))
        else:
            arrays.append(pc.cast(pa.array(value) if isinstance(value, list) else value, spec.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def nemesis_rows(start: int, end: int) -> list[dict[str, Any]]:
    """Fault then heal once per cycle, for cycles starting in messages [start, end) (a message
    is a millisecond: synth_txn's transactions use the same clock)."""
    rows = []
    for cycle in range(-(-start // _CYCLE), -(-end // _CYCLE)):
        for i, (phase, what) in enumerate(((3, "partition {0} | {1 2}"), (6, "heal"))):
            when = (cycle * _CYCLE + phase * _CYCLE // 10) * _MS
            op = _NEMESIS + cycle * 2 + i
            for j, type_ in enumerate(("invoke", "ok")):
                rows.append(
                    {
                        **{n: None for n in COLUMN_NAMES},
                        "run_id": "synth",
                        "process": 0,
                        "seq": (cycle * 2 + i) * 2 + j,
                        "op": op,
                        "time_ns": when + j * _MS,
                        "type": type_,
                        "f": "nemesis",
                        "partition": -1,
                        "generation": -1,
                        "value": what,
                    }
                )
    return rows


def write_part(root: Path, index: int, tables: list[pa.Table]) -> tuple[Path, int]:
    """One chunk's tables as the history file part-{index}.parquet; its path and rows."""
    table = pa.concat_tables(tables)
    path = root / f"part-{index:05d}.parquet"
    with ParquetHistoryWriter(path, row_group_size=1 << 20) as writer:
        writer.write_table(table)
    return path, table.num_rows


def generate(directory: str | Path, spec: Spec, *, chunk: int = 1 << 17) -> Synthesized:
    """Write spec's history as Parquet files in `directory`, `chunk` messages per partition per
    file (a multiple of the poll size), and return the counts a correct checker reports."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    chunk = max(POLL, chunk // POLL * POLL)
    messages = max(4 * POLL, round(spec.rows / (spec.partitions * ROWS_PER_MESSAGE) / POLL) * POLL)
    unread = int(messages * spec.unseen)
    readable = messages - unread
    expected = dict.fromkeys(ANOMALIES, 0)
    expected["unseen"] = unread * spec.partitions
    exclusive: set[int] = set()
    rows, files = 0, []
    kinds = sorted(spec.rates)
    for index, n0 in enumerate(range(0, messages, chunk)):
        n1 = min(messages, n0 + chunk)
        tables = [pa.Table.from_pylist(nemesis_rows(n0, n1), ARROW_SCHEMA)]
        for p in range(spec.partitions):
            part = _Partition(p, spec, messages, readable)
            rng = random.Random(f"{spec.seed}/{p}/{n0}")
            extra: list[dict[str, Any]] = []
            no_send: set[int] = set()
            no_read: set[int] = set()
            first = max(n0 - n0 % POLL + SLOT, POLL + SLOT)
            for n in range(first, min(n1, readable - POLL), POLL):
                draw, edge = rng.random(), 0.0
                for kind in kinds:
                    edge += spec.rates[kind] * POLL
                    if draw < edge:
                        planted, sends, reads = part.plant(kind, n)
                        extra += planted
                        no_send |= sends
                        no_read |= reads
                        expected[kind] += 1
                        if kind == "group_exclusivity":
                            exclusive.add(p)
                        break
            tables.append(part.base(n0, n1, no_send, no_read))
            if extra:
                tables.append(pa.Table.from_pylist(extra, ARROW_SCHEMA))
        path, written = write_part(root, index, tables)
        rows += written
        files.append(path)
    plants = dict(expected)
    expected["poll_skip"] += plants["lost_write"]
    expected["duplicate"] += plants["inconsistent_offset"]
    expected["redelivery"] += plants["group_exclusivity"]
    expected["group_exclusivity"] = len(exclusive)
    return Synthesized(rows, files, expected)
