"""The anomaly rules of docs/history.md in plain Python: the reference the Spark jobs must match.

Written for clarity over speed and kept free of I/O, so a test can hand it a few events and read
the definition straight off the code. Every choice the contract leaves open (example order, which
rows are an example's context, tie-breaks) is made here and mirrored by the Spark engine
(harness.checker.spark_rules).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import Any

from harness.checker.events import (
    TPO,
    Instance,
    has_position,
    is_read,
    offset_of,
    topic_of,
    value_of,
)
from harness.checker.result import (
    ANOMALIES,
    DEFAULT_GUARANTEE,
    EXAMPLE_FIELDS,
    EXAMPLE_ORDER,
    MAX_EXAMPLES,
    ROWS_PER_EXAMPLE,
    AnomalyResult,
    CheckResult,
)
from harness.checker.rules_txn import (
    Transactions,
    aborted_values,
    g1c,
    is_read_committed,
    precommitted_reads,
    processing,
    torn_transactions,
)
from harness.history import CONSUMER_PROTOCOL, Event


def _context(rows: Iterable[Event]) -> list[dict[str, Any]]:
    ordered = sorted(rows, key=lambda e: (e.process, e.seq))
    return [e.as_dict() for e in ordered[:ROWS_PER_EXAMPLE]]


class _History:
    """The views of a history that several rules share.

    Transactions narrow some of them (docs/history.md, "Transactions"): only reads that count
    say a value was read or an offset passed, and read_committed pairs of reads skip only
    committed values legitimately. Without transactions every read counts and every value is
    committed, so these views are what they were before transactions existed.
    """

    def __init__(self, events: Sequence[Event]) -> None:
        self.events = events
        self.txns = Transactions(events)
        self.reads = [e for e in events if is_read(e)]
        self.counted_reads = [e for e in self.reads if self.txns.counts(e)]
        self.known = [e for e in events if e.f == "send" and e.type == "ok" and has_position(e)]
        self.by_op: dict[int, list[Event]] = defaultdict(list)
        self.by_value: dict[str, list[Event]] = defaultdict(list)
        self.invoke_seq: dict[tuple[int, int], int] = {}  # by (process, op)
        self.invoked: set[str] = set()
        for e in events:
            self.by_op[e.op].append(e)
            if e.f in ("send", "poll") and e.value is not None:
                self.by_value[e.value].append(e)
            if e.f == "send" and e.type == "invoke":
                self.invoked.add(value_of(e))
                self.invoke_seq[(e.process, e.op)] = e.seq
        self.read_values = {value_of(e) for e in self.reads}
        self.counted_values = {value_of(e) for e in self.counted_reads}
        self.observed_at: dict[TPO, list[Event]] = defaultdict(list)
        self.positions: dict[str, set[TPO]] = defaultdict(set)
        for e in self.reads + self.known:
            tpo = (topic_of(e), e.partition, offset_of(e))
            self.observed_at[tpo].append(e)
            self.positions[value_of(e)].add(tpo)
        self.max_read: dict[tuple[str, int], int] = {}
        for e in self.counted_reads:
            tp = (topic_of(e), e.partition)
            self.max_read[tp] = max(self.max_read.get(tp, offset_of(e)), offset_of(e))
        offsets: dict[tuple[str, int], set[int]] = defaultdict(set)
        committed: dict[tuple[str, int], set[int]] = defaultdict(set)
        for (t, p, o), rows in self.observed_at.items():
            offsets[(t, p)].add(o)
            if any(self.txns.is_committed(value_of(e)) for e in rows):
                committed[(t, p)].add(o)
        self.observed_offsets = {tp: sorted(os_) for tp, os_ in offsets.items()}
        self.committed_offsets = {tp: sorted(os_) for tp, os_ in committed.items()}

    def observed_between(
        self, topic: str, partition: int, low: int, high: int, committed_only: bool = False
    ) -> int:
        """How many distinct offsets of the t/p strictly between low and high are observed
        (with committed_only, observed holding a committed value)."""
        found = self.committed_offsets if committed_only else self.observed_offsets
        offsets = found.get((topic, partition), [])
        return max(0, bisect.bisect_left(offsets, high) - bisect.bisect_right(offsets, low))


def _unread_sends(h: _History) -> tuple[list[Instance], list[Instance]]:
    lost: list[Instance] = []
    unseen: list[Instance] = []
    for s in h.known:
        if s.value in h.counted_values or not h.txns.is_committed(value_of(s)):
            continue
        highest = h.max_read.get((topic_of(s), s.partition))
        fields = {
            "topic": s.topic,
            "partition": s.partition,
            "offset": s.offset,
            "value": s.value,
            "op": s.op,
            "max_read_offset": highest,
        }
        target = lost if highest is not None and highest > offset_of(s) else unseen
        target.append((fields, h.by_op[s.op]))
    return lost, unseen


def _by_value(h: _History, values: Iterable[str]) -> list[Instance]:
    return [({"value": v}, h.by_value[v]) for v in values]


def _inconsistent(h: _History) -> list[Instance]:
    return [
        ({"topic": tpo[0], "partition": tpo[1], "offset": tpo[2]}, rows)
        for tpo, rows in h.observed_at.items()
        if len({e.value for e in rows}) > 1
    ]


def _nonmonotonic_sends(h: _History) -> list[Instance]:
    streams: dict[tuple[int, str, int], list[tuple[int, Event]]] = defaultdict(list)
    for s in h.known:
        if (s.process, s.op) in h.invoke_seq:
            stream_key = (s.process, topic_of(s), s.partition)
            streams[stream_key].append((h.invoke_seq[(s.process, s.op)], s))
    found: list[Instance] = []
    for (process, topic, partition), stream in streams.items():
        stream.sort(key=lambda item: item[0])
        for (_, before), (seq, after) in pairwise(stream):
            if offset_of(after) < offset_of(before):
                fields = {
                    "process": process,
                    "topic": topic,
                    "partition": partition,
                    "seq": seq,
                    "offset": after.offset,
                    "previous_offset": before.offset,
                    "op": after.op,
                    "previous_op": before.op,
                }
                rows = h.by_op[before.op] + h.by_op[after.op]
                found.append((fields, rows))
    return found


def _read_pairs(h: _History) -> tuple[list[Instance], list[Instance]]:
    """Consecutive reads inside one run; an assign or revoke of the t/p ends a run, and so
    does the completion row of a failed transaction the process read the t/p in."""
    streams: dict[tuple[int, str, int], list[Event]] = defaultdict(list)
    for e in h.events:
        if is_read(e) or e.f in ("assign", "revoke"):
            streams[(e.process, topic_of(e), e.partition)].append(e)
    for key, end in h.txns.run_ends(h.reads):
        streams[key].append(end)
    backwards: list[Instance] = []
    skips: list[Instance] = []
    for (process, topic, partition), stream in streams.items():
        stream.sort(key=lambda e: e.seq)
        for first, second in pairwise(stream):
            if not (is_read(first) and is_read(second)):
                continue
            fields = {
                "process": process,
                "topic": topic,
                "partition": partition,
                "seq": second.seq,
                "offset": second.offset,
                "previous_seq": first.seq,
                "previous_offset": first.offset,
            }
            rows = [first, second]
            if offset_of(second) <= offset_of(first):
                backwards.append((fields, rows))
            else:
                committed = is_read_committed(first) and is_read_committed(second)
                between = h.observed_between(
                    topic, partition, offset_of(first), offset_of(second), committed
                )
                if between:
                    skips.append(({**fields, "observed_between": between}, rows))
    return backwards, skips


def _commit_regressions(h: _History) -> list[Instance]:
    streams: dict[tuple[str, str, int], list[Event]] = defaultdict(list)
    for e in h.events:
        if e.f == "commit" and e.type == "ok" and e.group is not None and h.txns.counts(e):
            streams[(e.group, topic_of(e), e.partition)].append(e)
    found: list[Instance] = []
    for (group, topic, partition), stream in streams.items():
        stream.sort(key=lambda e: (e.time_ns, e.process, e.seq))
        for before, after in pairwise(stream):
            if offset_of(after) < offset_of(before):
                fields = {
                    "group": group,
                    "topic": topic,
                    "partition": partition,
                    "time_ns": after.time_ns,
                    "process": after.process,
                    "seq": after.seq,
                    "offset": after.offset,
                    "previous_process": before.process,
                    "previous_seq": before.seq,
                    "previous_offset": before.offset,
                }
                found.append((fields, [before, after]))
    return found


def _group_exclusivity(h: _History) -> list[Instance]:
    return _classic_exclusivity(h) + _consumer_protocol_exclusivity(h)


def _classic_exclusivity(h: _History) -> list[Instance]:
    """Per (group, generation, t/p) of the classic protocol: fail when two processes' reads of
    it interleave in time.

    Each process's reads span [first, last]; sorted by first, a process that starts reading
    before an earlier one's last read overlaps it. Processes that read one after the other do
    not: KIP-345 hands a static member's assignment to its replacement in the same generation.
    """
    spans: dict[tuple[str, int, str, int], dict[int, list[Any]]] = defaultdict(dict)
    for e in h.reads:
        if e.group is None or e.generation < 0 or e.group_protocol == CONSUMER_PROTOCOL:
            continue
        per_process = spans[(e.group, e.generation, topic_of(e), e.partition)]
        span = per_process.setdefault(e.process, [e, e.time_ns, e.time_ns])
        if e.seq < span[0].seq:
            span[0] = e
        span[1], span[2] = min(span[1], e.time_ns), max(span[2], e.time_ns)
    found: list[Instance] = []
    for key, per_process in spans.items():
        if not _interleave([(first, last, p) for p, (_, first, last) in per_process.items()]):
            continue
        processes = sorted(per_process)[:ROWS_PER_EXAMPLE]
        fields = {
            "group": key[0],
            "generation": key[1],
            "topic": key[2],
            "partition": key[3],
            "process_count": len(per_process),
            "processes": processes,
        }
        found.append((fields, [per_process[p][0] for p in processes]))
    return found


def _interleave(spans: list[tuple[int, int, int]]) -> bool:
    """Whether any of the (first, last, process) spans starts before an earlier one ends
    (sorted by first, the longer span first on a tie, then by process: as spark_rules.py does)."""
    latest_end: int | None = None
    for first, last, _ in sorted(spans, key=lambda s: (s[0], -s[1], s[2])):
        if latest_end is not None and first < latest_end:
            return True
        latest_end = last if latest_end is None else max(latest_end, last)
    return False


def _ownerships(h: _History) -> dict[tuple[str, str, int], list[list[Any]]]:
    """The consumer protocol's reads as ownerships, per (group, t/p): one per (process, n),
    where n counts the process's assign rows of the t/p before the read (by seq), each as
    [first read, first time_ns, last time_ns, process]. An ownership in which the process lost
    the t/p (an ``info`` revoke: fenced, its member epoch void) is left out."""
    streams: dict[tuple[int, str, int], list[Event]] = defaultdict(list)
    for e in h.events:
        if is_read(e) or e.f in ("assign", "revoke"):
            streams[(e.process, topic_of(e), e.partition)].append(e)
    found: dict[tuple[str, str, int], list[list[Any]]] = defaultdict(list)
    for (process, topic, partition), stream in streams.items():
        spans: dict[int, dict[str, list[Any]]] = defaultdict(dict)
        lost: set[int] = set()
        owned = 0
        for e in sorted(stream, key=lambda e: e.seq):
            if e.f == "assign":
                owned += 1
            elif e.f == "revoke" and e.type == "info":
                lost.add(owned)
            elif is_read(e) and e.group is not None and e.group_protocol == CONSUMER_PROTOCOL:
                span = spans[owned].setdefault(e.group, [e, e.time_ns, e.time_ns, process])
                span[1], span[2] = min(span[1], e.time_ns), max(span[2], e.time_ns)
        for owned, by_group in spans.items():
            if owned not in lost:
                for group, span in by_group.items():
                    found[(group, topic, partition)].append(span)
    return found


def _consumer_protocol_exclusivity(h: _History) -> list[Instance]:
    """Per (group, t/p) of KIP-848's consumer protocol: fail when ownerships of two processes
    interleave — one's first read at or after the other's first and strictly before its last.

    There is no generation to key by: each member has its own epoch, and the coordinator hands a
    partition to a member (at a newer epoch) only once its previous owner has revoked it, so the
    previous owner's reads must end before the next owner's begin, whatever their epochs. A
    fenced member is the exception Kafka allows: it may read on until it learns it lost the
    partition, which is why ownerships that end so are left out (_ownerships).
    """
    found: list[Instance] = []
    for (group, topic, partition), spans in _ownerships(h).items():
        firsts: dict[int, Event] = {}
        for a in spans:
            for b in spans:
                if a[3] != b[3] and a[1] <= b[1] < a[2]:
                    for span in (a, b):
                        first = firsts.get(span[3])
                        if first is None or span[0].seq < first.seq:
                            firsts[span[3]] = span[0]
        if not firsts:
            continue
        processes = sorted(firsts)[:ROWS_PER_EXAMPLE]
        fields = {
            "group": group,
            "generation": -1,
            "topic": topic,
            "partition": partition,
            "process_count": len(firsts),
            "processes": processes,
        }
        found.append((fields, [firsts[p] for p in processes]))
    return found


def _redeliveries(h: _History) -> list[Instance]:
    """Offsets a group read in two or more polls that count; the example shows every read of
    the group there, those that do not count (inside a transaction that did not commit) too."""
    reads: dict[tuple[str, str, int, int], list[Event]] = defaultdict(list)
    for e in h.reads:
        if e.group is not None:
            reads[(e.group, topic_of(e), e.partition, offset_of(e))].append(e)
    names = ("group", "topic", "partition", "offset")
    found: list[Instance] = []
    for key, rows in reads.items():
        counted = [e for e in rows if h.txns.counts(e)]
        if len({e.op for e in counted}) > 1:
            found.append(({**dict(zip(names, key, strict=True)), "reads": len(counted)}, rows))
    return found


def _stats(h: _History) -> dict[str, Any]:
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for e in h.events:
        counts[(e.f, e.type)] += 1
    sends = counts[("send", "invoke")]
    done = {t: counts[("send", t)] for t in ("ok", "fail", "info")}
    times = [e.time_ns for e in h.events]
    return {
        "rows": len(h.events),
        "processes": len({e.process for e in h.events}),
        "sends": sends,
        "sends_ok": done["ok"],
        "sends_fail": done["fail"],
        "sends_info": done["info"],
        "sends_pending": sends - sum(done.values()),
        "sends_ok_unknown_offset": done["ok"] - len(h.known),
        "polls": counts[("poll", "invoke")],
        "records_read": len(h.reads),
        "commits_ok": counts[("commit", "ok")],
        "commits_failed": counts[("commit", "fail")] + counts[("commit", "info")],
        "assigns": sum(n for (f, _), n in counts.items() if f == "assign"),
        "revokes": sum(n for (f, _), n in counts.items() if f == "revoke"),
        "nemesis_ops": counts[("nemesis", "invoke")],
        "topic_partitions": len(h.observed_offsets),
        **h.txns.stats(),
        "first_time_ns": min(times, default=None),
        "last_time_ns": max(times, default=None),
    }


def _result(name: str, instances: list[Instance], max_examples: int) -> AnomalyResult:
    order = EXAMPLE_ORDER[name]
    chosen = sorted(instances, key=lambda item: tuple(item[0][k] for k in order))[:max_examples]
    return AnomalyResult(
        count=len(instances),
        examples=[
            {**{k: fields[k] for k in EXAMPLE_FIELDS[name]}, "rows": _context(rows)}
            for fields, rows in chosen
        ],
    )


def check_events(
    events: Sequence[Event],
    guarantee: str = DEFAULT_GUARANTEE,
    *,
    max_examples: int = MAX_EXAMPLES,
) -> CheckResult:
    """Judge a validated history (see harness.history.read_history) under one guarantee."""
    h = _History(events)
    lost, unseen = _unread_sends(h)
    backwards, skips = _read_pairs(h)
    doubles, undone = processing(h.txns, h.events, h.reads, h.by_op, h.positions)
    early = precommitted_reads(h.txns, h.reads)
    found: dict[str, list[Instance]] = {
        "lost_write": lost,
        "unseen": unseen,
        "duplicate": _by_value(h, (v for v in h.invoked if len(h.positions.get(v, ())) > 1)),
        "inconsistent_offset": _inconsistent(h),
        "aborted_read": _by_value(h, aborted_values(h.txns, h.reads)),
        "phantom_read": _by_value(h, h.read_values - h.invoked),
        "nonmonotonic_send": _nonmonotonic_sends(h),
        "nonmonotonic_poll": backwards,
        "poll_skip": skips,
        "commit_regression": _commit_regressions(h),
        "group_exclusivity": _group_exclusivity(h),
        "redelivery": _redeliveries(h),
        "precommitted_read": [
            ({"value": v, "txn": t}, h.by_value[v]) for v, t in early.items()
        ],
        "torn_transaction": torn_transactions(h.txns, h.reads, h.known, h.by_op),
        "g1c": g1c(h.txns, h.reads),
        "double_processed": doubles,
        "unprocessed": undone,
    }
    return CheckResult(
        guarantee=guarantee,
        anomalies={name: _result(name, found[name], max_examples) for name in ANOMALIES},
        stats=_stats(h),
    )
