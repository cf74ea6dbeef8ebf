"""The transaction rules of docs/history.md ("Transactions") in plain Python, for rules.py.

Two parts. Transactions is the history's transaction view the contract's Terms define: how each
transaction ended, which committed, which values are committed or aborted, which rows count;
rules.py reads it to narrow the rules written before transactions existed. The five rules that
exist only for transactions (precommitted_read, torn_transaction, g1c, double_processed,
unprocessed) are here in full. A history without the transaction columns has no transaction,
every row counts and every poll is read_uncommitted, so all of this leaves its verdict as it was.

The g1c cycle search (components and explanation) is the one piece the Spark engine runs too:
it collects the few transaction-to-transaction edges to the driver and calls g1c_cycles, so the
two engines cannot explain a cycle differently.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from harness.checker.events import TPO, Instance, is_read, tpo_of, value_of
from harness.checker.result import ROWS_PER_EXAMPLE
from harness.history import READ_COMMITTED, Event

TXN = "txn"  # the f of a transaction's own rows


class Outcome(StrEnum):
    """How a transaction ended: its completion row's type; none at all is unknown (info)."""

    OK = "ok"
    FAIL = "fail"
    INFO = "info"


def is_read_committed(event: Event) -> bool:
    """A poll row of a read_committed consumer (null isolation is Kafka's read_uncommitted)."""
    return event.isolation == READ_COMMITTED


class Transactions:
    """The contract's Terms over one history.

    A transaction *committed* if it completed ok, or completed info and a read_committed poll
    outside it read one of its values (the broker let a consumer see it, so it was committed).
    A value is committed when its send completed ok and it has no transaction or one that
    committed; aborted when its send completed fail or its transaction did. A row counts when it
    has no transaction or its transaction committed. A txn column naming no transaction of the
    history is a transaction with no completion row: unknown.
    """

    def __init__(self, events: Sequence[Event]) -> None:
        self.invoked: list[int] = []  # the transactions (their ops), in history order
        self.ends: dict[int, Event] = {}  # each transaction's completion row
        self.value_txn: dict[str, int] = {}  # a value's transaction: its send's txn
        self.send_outcome: dict[str, str] = {}  # a value's send's completion type
        done: dict[str, int] = {}  # a value's send's completion time
        for e in events:
            if e.f == TXN:
                if e.type == "invoke":
                    self.invoked.append(e.op)
                else:
                    self.ends[e.op] = e
            elif e.f == "send":
                if e.txn is not None:
                    value = value_of(e)
                    self.value_txn[value] = max(e.txn, self.value_txn.get(value, e.txn))
                if e.type != "invoke":
                    self.send_outcome[value_of(e)] = e.type
                    done[value_of(e)] = max(e.time_ns, done.get(value_of(e), e.time_ns))
        # Per transaction: the latest completion row (any type) of its sends, by time_ns.
        self.sends_done: dict[int, int] = {}
        for value, txn in self.value_txn.items():
            if value in done:
                self.sends_done[txn] = max(done[value], self.sends_done.get(txn, done[value]))
        seen_outside = {
            self.value_txn[value_of(e)]
            for e in events
            if is_read(e) and is_read_committed(e) and value_of(e) in self.value_txn
            and e.txn != self.value_txn[value_of(e)]
        }
        referenced = set(self.value_txn.values()) | {e.txn for e in events if e.txn is not None}
        self.committed = {
            t for t in referenced | set(self.invoked)
            if self.outcome(t) == Outcome.OK
            or (self.outcome(t) == Outcome.INFO and t in seen_outside)
        }

    def outcome(self, txn: int) -> Outcome:
        end = self.ends.get(txn)
        return Outcome.INFO if end is None else Outcome(end.type)

    def counts(self, event: Event) -> bool:
        return event.txn is None or event.txn in self.committed

    def is_committed(self, value: str) -> bool:
        txn = self.value_txn.get(value)
        return self.send_outcome.get(value) == "ok" and (txn is None or txn in self.committed)

    def in_aborted_txn(self, value: str) -> bool:
        txn = self.value_txn.get(value)
        return txn is not None and self.outcome(txn) == Outcome.FAIL

    def run_ends(self, events: Iterable[Event]) -> list[tuple[tuple[int, str, int], Event]]:
        """Per (process, t, p) a process read inside a transaction that failed: the
        transaction's completion row, which ends the process's run of reads of that t/p (it
        seeks back to the first offset it read there, docs/history.md)."""
        read_in: dict[int, set[tuple[str, int]]] = defaultdict(set)
        for e in events:
            if is_read(e) and e.txn is not None and e.txn in self.ends:
                end = self.ends[e.txn]
                if end.type == Outcome.FAIL and e.process == end.process:
                    read_in[e.txn].add((tpo_of(e)[0], e.partition))
        return [
            ((self.ends[txn].process, topic, partition), self.ends[txn])
            for txn, tps in read_in.items()
            for topic, partition in tps
        ]

    def stats(self) -> dict[str, int]:
        committed = sum(1 for t in self.invoked if t in self.committed)
        aborted = sum(1 for t in self.invoked if self.outcome(t) == Outcome.FAIL)
        return {
            "txns": len(self.invoked),
            "txns_committed": committed,
            "txns_aborted": aborted,
            "txns_unknown": len(self.invoked) - committed - aborted,
        }


def aborted_values(txns: Transactions, reads: Iterable[Event]) -> set[str]:
    """aborted_read's values: read though their send failed, or read by a read_committed poll
    though their transaction failed (Jepsen's G1a)."""
    return {
        value_of(e)
        for e in reads
        if txns.send_outcome.get(value_of(e)) == "fail"
        or (is_read_committed(e) and txns.in_aborted_txn(value_of(e)))
    }


def precommitted_reads(txns: Transactions, reads: Iterable[Event]) -> dict[str, int]:
    """Per value read too early, its transaction: a read_committed poll read it inside its own
    transaction, or before the last of the transaction's sends had completed (a producer asks to
    commit only after its sends are done, so no commit could have made it visible yet)."""
    found: dict[str, int] = {}
    for e in reads:
        txn = txns.value_txn.get(value_of(e))
        if txn is None or not is_read_committed(e):
            continue
        done = txns.sends_done.get(txn)
        if e.txn == txn or (done is not None and e.time_ns < done):
            found[value_of(e)] = txn
    return found


def torn_transactions(
    txns: Transactions, reads: Sequence[Event], known: Sequence[Event],
    by_op: Mapping[int, Sequence[Event]],
) -> list[Instance]:
    """Committed transactions that read_committed consumers saw in part: one ok send read by a
    counting read_committed poll, another (at a known offset) read by none though one read past
    it. The example names the first such unread send by t/p/o."""
    seen = [e for e in reads if is_read_committed(e) and txns.counts(e)]
    seen_values = {value_of(e) for e in seen}
    highest: dict[tuple[str, int], int] = {}
    for e in seen:
        topic, partition, offset = tpo_of(e)
        highest[(topic, partition)] = max(highest.get((topic, partition), offset), offset)
    read_txns = {
        txns.value_txn[v] for v in seen_values
        if v in txns.value_txn and txns.send_outcome.get(v) == "ok"
    }
    unread: dict[int, tuple[TPO, Event]] = {}
    for s in known:
        txn = txns.value_txn.get(value_of(s))
        if txn is None or txn not in txns.committed or txn not in read_txns:
            continue
        tpo = tpo_of(s)
        if value_of(s) in seen_values or highest.get(tpo[:2], -1) <= tpo[2]:
            continue
        if txn not in unread or (tpo, value_of(s)) < (unread[txn][0], value_of(unread[txn][1])):
            unread[txn] = (tpo, s)
    found: list[Instance] = []
    for txn, ((topic, partition, offset), s) in unread.items():
        fields = {"txn": txn, "topic": topic, "partition": partition, "offset": offset,
                  "value": s.value}
        found.append((fields, [*by_op.get(txn, ()), *by_op[s.op]]))
    return found


# ---------------------------------------------------------------------------------------------
# g1c: cycles of write-read dependencies between transactions


@dataclass(frozen=True, order=True)
class Witness:
    """A read that makes the edge writer → reader: a read_committed poll inside the reader read
    the writer's value. The least by these fields (t/p/o first) explains its edge."""

    topic: str
    partition: int
    offset: int
    value: str
    process: int
    seq: int


@dataclass(frozen=True)
class Cycle:
    """One strongly connected component of the dependency graph (one g1c count)."""

    txns: list[int]  # every transaction of the component, ascending
    cycle: str  # one cycle through the lowest of them, edge by edge, as Elle explains one
    witnesses: list[Witness]  # the read behind each edge of that cycle, in its order


Edges = Mapping[tuple[int, int], Witness]  # (writer, reader) → the read that makes the edge


def g1c_cycles(edges: Edges) -> list[Cycle]:
    """The components of two or more transactions of the write-read graph, lowest first.

    Components come from scipy's strong connected_components. Each is explained by the shortest
    cycle through its lowest transaction (breadth first, neighbours ascending, so both engines
    name the same one): "T2 read T1's value 'a' at t/0/3; T1 read T2's value 'b' at t/1/0".
    """
    nodes = sorted({t for edge in edges for t in edge})
    if not nodes:
        return []
    index = {t: i for i, t in enumerate(nodes)}
    rows = [index[w] for w, _ in edges]
    cols = [index[r] for _, r in edges]
    graph = csr_matrix(([1] * len(edges), (rows, cols)), shape=(len(nodes), len(nodes)))
    _, labels = connected_components(graph, directed=True, connection="strong")
    members: dict[int, list[int]] = defaultdict(list)
    for node, label in zip(nodes, labels.tolist(), strict=True):
        members[label].append(node)
    readers: dict[int, list[int]] = defaultdict(list)
    for writer, reader in sorted(edges):
        readers[writer].append(reader)
    cycles = []
    for component in sorted(m for m in members.values() if len(m) > 1):
        path = _shortest_cycle(component[0], set(component), readers)
        witnesses = [edges[(a, b)] for a, b in zip(path, path[1:], strict=False)]
        steps = [
            f"T{b} read T{a}'s value {w.value!r} at {w.topic}/{w.partition}/{w.offset}"
            for (a, b), w in zip(zip(path, path[1:], strict=False), witnesses, strict=True)
        ]
        cycles.append(Cycle(component, "; ".join(steps), witnesses))
    return cycles


def _shortest_cycle(start: int, within: set[int], readers: Mapping[int, list[int]]) -> list[int]:
    """start, ..., start: the fewest edges inside the component, found breadth first."""
    parent: dict[int, int] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in readers.get(node, ()):
            if nxt == start:
                back = [node]
                while back[-1] != start:
                    back.append(parent[back[-1]])
                return [*reversed(back), start]
            if nxt in within and nxt not in parent:
                parent[nxt] = node
                queue.append(nxt)
    raise ValueError(f"T{start} is on no cycle of its component")


def dependency_edges(txns: Transactions, reads: Iterable[Event]) -> dict[tuple[int, int], Witness]:
    """T1 → T2 when a read_committed poll inside T2 (whatever became of it) read T1's value."""
    edges: dict[tuple[int, int], Witness] = {}
    for e in reads:
        writer = txns.value_txn.get(value_of(e))
        if e.txn is None or writer is None or writer == e.txn or not is_read_committed(e):
            continue
        topic, partition, offset = tpo_of(e)
        witness = Witness(topic, partition, offset, value_of(e), e.process, e.seq)
        edge = (writer, e.txn)
        if edge not in edges or witness < edges[edge]:
            edges[edge] = witness
    return edges


def g1c(txns: Transactions, reads: Sequence[Event]) -> list[Instance]:
    rows = {(e.process, e.seq): e for e in reads}
    return [
        (
            {"txn": c.txns[0], "txns": c.txns[:ROWS_PER_EXAMPLE], "cycle": c.cycle},
            [rows[(w.process, w.seq)] for w in c.witnesses],
        )
        for c in g1c_cycles(dependency_edges(txns, reads))
    ]


# ---------------------------------------------------------------------------------------------
# Consume-transform-produce: what became of each input value


def processing(
    txns: Transactions, events: Sequence[Event], reads: Sequence[Event],
    by_op: Mapping[int, Sequence[Event]], positions: Mapping[str, set[TPO]],
) -> tuple[list[Instance], list[Instance]]:
    """double_processed and unprocessed, per (group, input value).

    An input of group g is a committed value a poll of g read (at the t/p/o it read it); an
    output of g is a send of g derived from a value. Only committed outputs are work done.
    positions: each value's observed places (read by any poll, or acked at a known offset),
    its input *records*. A value its producer wrote twice is two records, and processing each
    once is exactly-once, so double_processed needs more committed outputs than records (and
    at least two: a value observed nowhere counts as one record).
    """
    outputs: dict[tuple[str, str], list[int]] = defaultdict(list)  # (g, input) → output ops
    for e in events:
        output = e.f == "send" and e.type == "ok" and e.derived_from is not None
        if output and e.group is not None and e.derived_from is not None \
                and txns.is_committed(value_of(e)):
            outputs[(e.group, e.derived_from)].append(e.op)
    inputs: dict[tuple[str, str], set[TPO]] = defaultdict(set)
    for e in reads:
        if e.group is not None and txns.is_committed(value_of(e)):
            inputs[(e.group, value_of(e))].add(tpo_of(e))
    doubles: list[Instance] = []
    done: dict[tuple[str, str, int], int] = {}  # (g, t, p) → highest offset of a processed input
    for (group, value), places in inputs.items():
        ops = outputs.get((group, value), [])
        records = max(1, len(positions.get(value, ())))
        if len(ops) > records:
            rows = [row for op in ops for row in by_op[op]]
            fields = {"group": group, "value": value, "outputs": len(ops), "records": records}
            doubles.append((fields, rows))
        for topic, partition, offset in places if ops else ():
            key = (group, topic, partition)
            done[key] = max(done.get(key, offset), offset)
    at: dict[tuple[str, TPO], list[Event]] = defaultdict(list)
    for e in reads:
        if e.group is not None:
            at[(e.group, tpo_of(e))].append(e)
    undone: list[Instance] = []
    for (group, value), places in inputs.items():
        if (group, value) in outputs:
            continue
        below = sorted(
            (tpo, done[(group, *tpo[:2])]) for tpo in places
            if done.get((group, *tpo[:2]), -1) > tpo[2]
        )
        if below:
            (topic, partition, offset), highest = below[0]
            fields = {"group": group, "value": value, "topic": topic, "partition": partition,
                      "offset": offset, "max_processed_offset": highest}
            undone.append((fields, at[(group, (topic, partition, offset))]))
    return doubles, undone

