"""Hand-built histories for the checker tests, written the way a workload would write them."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.checker.result import ANOMALIES, TRANSACTION_ANOMALIES
from harness.history import Event, write_jsonl, write_parquet


class Builder:
    """Appends the rows of whole operations, numbering seqs per process, ops and times."""

    def __init__(self, run_id: str = "test") -> None:
        self.run_id = run_id
        self.events: list[Event] = []
        self._seq: dict[int, int] = defaultdict(int)
        self._op = itertools.count(1)
        self._time = itertools.count(1_000, 1_000)

    def row(self, process: int, op: int, type_: str, f: str, **fields: Any) -> Event:
        time_ns = fields.pop("time_ns", None)
        event = Event(
            self.run_id,
            process,
            self._seq[process],
            op,
            next(self._time) if time_ns is None else time_ns,
            type_,
            f,
            **fields,
        )
        self._seq[process] += 1
        self.events.append(event)
        return event

    def send(
        self,
        process: int,
        value: str,
        offset: int | None,
        *,
        partition: int = 0,
        topic: str = "t",
        outcome: str | None = "ok",
        txn: int | None = None,
        group: str | None = None,
        derived_from: str | None = None,
    ) -> int:
        """A send; outcome None leaves it pending (invoke only). With `txn`, made inside that
        transaction; with `derived_from`, a consume-transform-produce output of `group`."""
        op = next(self._op)
        made = {"txn": txn, "group": group, "derived_from": derived_from}
        self.row(process, op, "invoke", "send", topic=topic, value=value, **made)
        if outcome is not None:
            known = outcome == "ok"
            self.row(
                process,
                op,
                outcome,
                "send",
                topic=topic,
                partition=partition if known else -1,
                offset=offset if known else None,
                value=value,
                error=None if known else "REQUEST_TIMED_OUT",
                **made,
            )
        return op

    def poll(
        self,
        process: int,
        records: list[tuple[int, str]],
        *,
        partition: int = 0,
        topic: str = "t",
        group: str | None = None,
        generation: int = -1,
        group_protocol: str | None = None,
        time_ns: int | None = None,
        txn: int | None = None,
        isolation: str | None = None,
    ) -> int:
        """One poll returning `records` as (offset, value) of one topic-partition; with
        `time_ns`, its rows are at that time."""
        op = next(self._op)
        at = {} if time_ns is None else {"time_ns": time_ns}
        group_fields = {"group": group, "generation": generation, "group_protocol": group_protocol,
                        "txn": txn, "isolation": isolation}
        self.row(process, op, "invoke", "poll", **group_fields, **at)
        for offset, value in records:
            self.row(
                process,
                op,
                "ok",
                "poll",
                topic=topic,
                partition=partition,
                offset=offset,
                value=value,
                **group_fields,
                **at,
            )
        return op

    def commit(
        self,
        process: int,
        offset: int,
        *,
        partition: int = 0,
        topic: str = "t",
        group: str | None = "g",
        outcome: str = "ok",
        time_ns: int | None = None,
        txn: int | None = None,
    ) -> None:
        fields: dict[str, Any] = {"time_ns": time_ns} if time_ns is not None else {}
        if txn is not None:
            fields["txn"] = txn
        self.row(
            process,
            next(self._op),
            outcome,
            "commit",
            topic=topic,
            partition=partition,
            offset=offset,
            group=group,
            **fields,
        )

    def assignment(
        self,
        f: str,
        process: int,
        *,
        partition: int = 0,
        topic: str = "t",
        type_: str = "ok",
        group: str | None = None,
        group_protocol: str | None = None,
    ) -> None:
        """An assign or revoke row; a revoke of type info is a lost partition (fenced)."""
        self.row(
            process,
            next(self._op),
            type_,
            f,
            topic=topic,
            partition=partition,
            group=group,
            group_protocol=group_protocol,
            error="_ASSIGNMENT_LOST" if type_ == "info" else None,
        )

    def begin(self, process: int, transactional_id: str = "tx") -> int:
        """A transaction's invoke row; its op is the txn the rows made inside it carry."""
        op = next(self._op)
        self.row(process, op, "invoke", "txn", value=transactional_id)
        return op

    def end(self, process: int, txn: int, outcome: str = "ok") -> None:
        """A transaction's completion row: ok committed, fail aborted, info unknown."""
        error = {"ok": None, "fail": "TRANSACTION_ABORTED", "info": "REQUEST_TIMED_OUT"}[outcome]
        self.row(process, txn, outcome, "txn", error=error)

    def nemesis(self, what: str) -> None:
        op = next(self._op)
        self.row(0, op, "invoke", "nemesis", value=what)
        self.row(0, op, "ok", "nemesis", value=what)

    def write(self, directory: Path, split: bool = False) -> Path:
        """Parquet, or with split=True the first half as Parquet and the rest as JSONL."""
        directory.mkdir(parents=True, exist_ok=True)
        half = len(self.events) // 2 if split else len(self.events)
        write_parquet(directory / "a.parquet", self.events[:half])
        if split:
            write_jsonl(directory / "b.jsonl", self.events[half:])
        return directory


def side_by_side(builders: Sequence[Builder]) -> Builder:
    """One history holding each of ``builders``' on names of its own: the k-th's processes,
    ops (and so txns), topics, groups, members, keys and values renamed, its times kept. A
    Spark check costs seconds whatever a small history's size, so the property tests judge a
    few such histories, not one check per history; with every instance asked for as an example
    (``max_examples``), the result still says what each engine found in each history."""
    union = Builder()

    def named(text: str | None, k: int) -> str | None:
        return None if text is None else f"{text}~{k}"

    for k, b in enumerate(builders):
        shift = k * 1_000_000
        union.events += [
            replace(e, process=e.process + 100 * k, op=e.op + shift,
                    txn=None if e.txn is None else e.txn + shift, topic=named(e.topic, k),
                    group=named(e.group, k), member=named(e.member, k), key=named(e.key, k),
                    value=named(e.value, k), derived_from=named(e.derived_from, k))
            for e in b.events
        ]
    return union


def zoo(transactional: bool = False) -> tuple[Builder, dict[str, int]]:
    """Every anomaly planted once, each on a topic of its own so none touches another; the
    transaction anomalies only when asked (their rows make the Spark engine join each row with
    its transaction's fate, which costs a small check several times what the rest does)."""
    b = Builder()
    # lost_write: b never read while offset 2 was (by separate readers, so no poll_skip).
    for offset, value in enumerate("abc"):
        b.send(1, f"lost-{value}", offset, topic="lost")
    b.poll(11, [(0, "lost-a")], topic="lost")
    b.poll(12, [(2, "lost-c")], topic="lost")
    # unseen: acked, never read; an ack without offset is only counted in the stats.
    b.send(1, "unseen-x", 0, topic="unseen")
    b.send(1, "acks0", None, topic="unseen", partition=-1)
    # duplicate: one value at offsets 0 and 1.
    b.send(1, "dup-d", 0, topic="dup")
    b.poll(11, [(0, "dup-d"), (1, "dup-d")], topic="dup")
    # inconsistent_offset: two acks name offset 0; each value is read there.
    b.send(1, "inc-e", 0, topic="inc")
    b.send(1, "inc-f", 0, topic="inc")
    b.poll(11, [(0, "inc-e")], topic="inc")
    b.poll(12, [(0, "inc-f")], topic="inc")
    # aborted_read: the send failed, yet the value was read.
    b.send(1, "abort-h", None, topic="abort", outcome="fail")
    b.poll(11, [(0, "abort-h")], topic="abort")
    # phantom_read: a value nobody sent.
    b.poll(11, [(0, "ghost")], topic="phantom")
    # nonmonotonic_send: the later send got the lower offset.
    b.send(2, "nms-i", 1, topic="nms")
    b.send(2, "nms-j", 0, topic="nms")
    b.poll(11, [(0, "nms-j"), (1, "nms-i")], topic="nms")
    # nonmonotonic_poll: a read goes back inside one run.
    b.send(1, "nmp-k", 0, topic="nmp")
    b.send(1, "nmp-l", 1, topic="nmp")
    b.poll(11, [(0, "nmp-k"), (1, "nmp-l"), (0, "nmp-k")], topic="nmp")
    # poll_skip: reads jump 0 -> 2 while offset 1 is observed (read by another process).
    for offset, value in enumerate("mno"):
        b.send(1, f"skip-{value}", offset, topic="skip")
    b.poll(11, [(0, "skip-m"), (2, "skip-o")], topic="skip")
    b.poll(12, [(1, "skip-n")], topic="skip")
    # commit_regression: 5 then 3; a failed and a group-less lower commit do not count.
    b.commit(13, 5, topic="commit", group="g2")
    b.commit(13, 3, topic="commit", group="g2")
    b.commit(13, 1, topic="commit", group="g2", outcome="fail")
    b.commit(13, 0, topic="commit", group=None)
    # group_exclusivity: two processes of g3, generation 1, read one partition, interleaved.
    b.send(1, "excl-q", 0, topic="excl")
    b.send(1, "excl-r", 1, topic="excl")
    b.send(1, "excl-t", 2, topic="excl")
    b.poll(14, [(0, "excl-q")], topic="excl", group="g3", generation=1)
    b.poll(15, [(2, "excl-t")], topic="excl", group="g3", generation=1)
    b.poll(14, [(1, "excl-r")], topic="excl", group="g3", generation=1)
    # redelivery: g4 reads offset 0 in two polls, in generations 1 and 2.
    b.send(1, "redeliv-s", 0, topic="redeliv")
    b.poll(16, [(0, "redeliv-s")], topic="redeliv", group="g4", generation=1)
    b.poll(17, [(0, "redeliv-s")], topic="redeliv", group="g4", generation=2)
    b.nemesis("partition {1} | {2}")
    b.nemesis("heal")
    if not transactional:
        return b, {**dict.fromkeys(ANOMALIES, 1), **dict.fromkeys(TRANSACTION_ANOMALIES, 0)}
    transactions(b)
    return b, dict.fromkeys(ANOMALIES, 1)


RC = "read_committed"


def transactions(b: Builder) -> None:
    """The zoo's transaction anomalies, one each, on topics of their own."""
    # precommitted_read: a read_committed poll inside the transaction reads its own send.
    t = b.begin(30)
    b.send(30, "pre-a", 0, topic="pre", txn=t)
    b.poll(30, [(0, "pre-a")], topic="pre", txn=t, isolation=RC)
    b.end(30, t)
    # torn_transaction: read_committed consumers see torn-b but never torn-a below it (a
    # read_uncommitted one does, so torn-a is no lost_write).
    t = b.begin(31)
    b.send(31, "torn-a", 0, topic="torn", txn=t)
    b.send(31, "torn-b", 1, topic="torn", txn=t)
    b.end(31, t)
    b.poll(32, [(1, "torn-b")], topic="torn", isolation=RC)
    b.poll(33, [(0, "torn-a")], topic="torn")
    # g1c: each of two transactions reads the other's value.
    t1, t2 = b.begin(34), b.begin(35)
    b.send(34, "cyc-a", 0, topic="cyc", txn=t1)
    b.send(35, "cyc-b", 0, topic="cyc", partition=1, txn=t2)
    b.poll(34, [(0, "cyc-b")], topic="cyc", partition=1, txn=t1, isolation=RC)
    b.poll(35, [(0, "cyc-a")], topic="cyc", txn=t2, isolation=RC)
    b.end(34, t1)
    b.end(35, t2)
    # double_processed: gd makes two outputs of one input.
    b.send(1, "in-a", 0, topic="ctpd")
    b.poll(36, [(0, "in-a")], topic="ctpd", group="gd", generation=1)
    for offset in range(2):
        b.send(36, f"out-{offset}", offset, topic="ctpd-out", group="gd", derived_from="in-a")
    b.poll(37, [(0, "out-0"), (1, "out-1")], topic="ctpd-out")
    # unprocessed: gu makes an output of u-b but none of u-a below it.
    b.send(1, "u-a", 0, topic="ctpu")
    b.send(1, "u-b", 1, topic="ctpu")
    b.poll(38, [(0, "u-a"), (1, "u-b")], topic="ctpu", group="gu", generation=1)
    b.send(38, "uo-b", 0, topic="ctpu-out", group="gu", derived_from="u-b")
    b.poll(37, [(0, "uo-b")], topic="ctpu-out")


def clean() -> Builder:
    """A run with a group consumer, a rebalance, commits and a fault: nothing wrong."""
    b = Builder()
    b.assignment("assign", 10)
    for offset in range(6):
        b.send(1, f"v{offset}", offset)
    b.nemesis("kill broker 1")
    b.poll(10, [(0, "v0"), (1, "v1"), (2, "v2")], group="g", generation=1)
    b.commit(10, 3)
    b.assignment("revoke", 10)
    b.nemesis("heal")
    b.assignment("assign", 20)
    b.poll(20, [(3, "v3"), (4, "v4"), (5, "v5")], group="g", generation=2)
    b.commit(20, 6)
    return b


def allowed_only() -> tuple[Builder, dict[str, int]]:
    """Anomalies at-least-once tolerates (and exactly-once does not): duplicate, redelivery,
    nonmonotonic_send, plus unseen, which fails no guarantee."""
    b = Builder()
    b.send(1, "a", 1)
    b.send(1, "b", 0)  # nonmonotonic_send
    b.send(1, "c", 2)
    b.send(1, "tail", 9, partition=1)  # unseen
    b.poll(10, [(0, "b"), (1, "a"), (2, "c"), (3, "c")], group="g", generation=1)  # duplicate
    b.assignment("revoke", 10)
    b.poll(20, [(2, "c")], group="g", generation=2)  # redelivery of offset 2
    expected = dict.fromkeys(ANOMALIES, 0)
    expected.update(duplicate=1, redelivery=1, nonmonotonic_send=1, unseen=1)
    return b, expected
