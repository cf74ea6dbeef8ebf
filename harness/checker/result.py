"""What a check produces, independent of the engine that computed it.

The anomaly names, the guarantee table and the JSON shape are the contract (docs/history.md); both
engines fill the same CheckResult so the property test can demand identical answers and the
reports never care which engine ran.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.checker import nemesis_ops
from harness.checker.nemesis_ops import FaultWindow, NemesisOp, NemesisRow
from harness.schema import SCHEMA_VERSION  # one version for every JSON document

# The anomalies only transactions make (docs/history.md, "Transactions"): each counts 0 in a
# history without the transaction columns.
TRANSACTION_ANOMALIES = (
    "precommitted_read",
    "torn_transaction",
    "g1c",
    "double_processed",
    "unprocessed",
)
ANOMALIES = (
    "lost_write",
    "unseen",
    "duplicate",
    "inconsistent_offset",
    "aborted_read",
    "phantom_read",
    "nonmonotonic_send",
    "nonmonotonic_poll",
    "poll_skip",
    "commit_regression",
    "group_exclusivity",
    "redelivery",
    *TRANSACTION_ANOMALIES,
)

# What no guarantee tolerates: a transaction seen before it could commit, seen in part, or seen
# in a cycle of transactions that each saw the other.
_EVERY = frozenset({"precommitted_read", "torn_transaction", "g1c"})
_AT_LEAST_ONCE = _EVERY | frozenset(
    {
        "unprocessed",
        "lost_write",
        "inconsistent_offset",
        "aborted_read",
        "phantom_read",
        "nonmonotonic_poll",
        "poll_skip",
        "commit_regression",
        "group_exclusivity",
    }
)
GUARANTEES: dict[str, frozenset[str]] = {
    "at-least-once": _AT_LEAST_ONCE,
    "exactly-once": _AT_LEAST_ONCE
    | {"duplicate", "redelivery", "nonmonotonic_send", "double_processed"},
    "at-most-once": _EVERY | frozenset(
        {
            "inconsistent_offset",
            "aborted_read",
            "phantom_read",
            "duplicate",
            "redelivery",
            "group_exclusivity",
        }
    ),
}
DEFAULT_GUARANTEE = "at-least-once"

STATS = (
    "rows",
    "processes",
    "sends",
    "sends_ok",
    "sends_fail",
    "sends_info",
    "sends_pending",
    "sends_ok_unknown_offset",
    "polls",
    "records_read",
    "commits_ok",
    "commits_failed",
    "assigns",
    "revokes",
    "nemesis_ops",
    "topic_partitions",
    "txns",
    "txns_committed",
    "txns_aborted",
    "txns_unknown",
    "first_time_ns",
    "last_time_ns",
)

MAX_EXAMPLES = 5
ROWS_PER_EXAMPLE = 10

_TPO = ("topic", "partition", "offset")
_PAIR = ("process", "topic", "partition", "seq")
_COMMIT = ("group", "topic", "partition", "time_ns", "process", "seq")
# Per anomaly: the fields that order its examples (the first MAX_EXAMPLES are reported), then
# every field an example reports besides "rows". Both engines build examples from this.
EXAMPLE_ORDER: dict[str, tuple[str, ...]] = {
    "lost_write": (*_TPO, "op"),
    "unseen": (*_TPO, "op"),
    "duplicate": ("value",),
    "inconsistent_offset": _TPO,
    "aborted_read": ("value",),
    "phantom_read": ("value",),
    "nonmonotonic_send": _PAIR,
    "nonmonotonic_poll": _PAIR,
    "poll_skip": _PAIR,
    "commit_regression": _COMMIT,
    "group_exclusivity": ("group", "generation", "topic", "partition"),
    "redelivery": ("group", *_TPO),
    "precommitted_read": ("value",),
    "torn_transaction": ("txn",),
    "g1c": ("txn",),
    "double_processed": ("group", "value"),
    "unprocessed": ("group", "value"),
}
EXAMPLE_FIELDS: dict[str, tuple[str, ...]] = {
    "lost_write": (*_TPO, "value", "op", "max_read_offset"),
    "unseen": (*_TPO, "value", "op", "max_read_offset"),
    "duplicate": ("value",),
    "inconsistent_offset": _TPO,
    "aborted_read": ("value",),
    "phantom_read": ("value",),
    "nonmonotonic_send": (*_PAIR, "offset", "previous_offset", "op", "previous_op"),
    "nonmonotonic_poll": (*_PAIR, "offset", "previous_seq", "previous_offset"),
    "poll_skip": (*_PAIR, "offset", "previous_seq", "previous_offset", "observed_between"),
    "commit_regression": (
        *_COMMIT,
        "offset",
        "previous_process",
        "previous_seq",
        "previous_offset",
    ),
    "group_exclusivity": (
        "group",
        "generation",
        "topic",
        "partition",
        "process_count",
        "processes",
    ),
    "redelivery": ("group", *_TPO, "reads"),
    # txn: the transaction whose value was read too early.
    "precommitted_read": ("value", "txn"),
    # The transaction, and its first (by t/p/o) ok send that went unread.
    "torn_transaction": ("txn", *_TPO, "value"),
    # txn: the component's lowest transaction; txns: all of them (at most ROWS_PER_EXAMPLE);
    # cycle: one cycle through txn, edge by edge, with the read that makes each edge.
    "g1c": ("txn", "txns", "cycle"),
    # value: the input value; outputs: how many committed outputs were derived from it;
    # records: at how many places (t/p/o) it was observed, at least 1.
    "double_processed": ("group", "value", "outputs", "records"),
    # value: the input value; t/p/o: its first place (by t/p/o) below a processed input, the
    # highest of which (in that t/p) is max_processed_offset.
    "unprocessed": ("group", "value", *_TPO, "max_processed_offset"),
}


@dataclass
class AnomalyResult:
    count: int = 0
    # Each example: the fields that identify the instance, and "rows": the history rows
    # involved (ordered by process, seq; at most ROWS_PER_EXAMPLE).
    examples: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class CheckResult:
    guarantee: str
    anomalies: dict[str, AnomalyResult]
    stats: dict[str, Any]

    def __post_init__(self) -> None:
        if self.guarantee not in GUARANTEES:
            raise ValueError(f"unknown guarantee {self.guarantee!r}; use one of {list(GUARANTEES)}")
        missing = set(ANOMALIES) - set(self.anomalies)
        if missing:
            raise ValueError(f"result lacks anomalies {sorted(missing)}")

    def fails(self, name: str) -> bool:
        """Whether this anomaly, if present, fails the run under the guarantee asked for."""
        return name in GUARANTEES[self.guarantee]

    @property
    def failing(self) -> list[str]:
        return [n for n in ANOMALIES if self.anomalies[n].count and self.fails(n)]

    @property
    def valid(self) -> bool:
        return not self.failing

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "valid": self.valid,
            "guarantee": self.guarantee,
            "anomalies": {
                name: {
                    "count": self.anomalies[name].count,
                    "examples": self.anomalies[name].examples,
                }
                for name in ANOMALIES
            },
            "stats": {name: self.stats.get(name) for name in STATS},
        }


@dataclass
class TimelineBucket:
    start_ns: int
    sends_ok: int
    sends_failed: int  # fail or info
    records_read: int
    latency_mean_ms: float | None
    latency_p99_ms: float | None


@dataclass
class OffsetPoint:
    time_ns: int
    offset: int
    kind: str  # "send" (acked) or "read"
    process: int


@dataclass
class Neighborhood:
    """The offsets of one partition around one example, to see what happened next to it."""

    anomaly: str
    example: int
    topic: str
    partition: int
    offset: int
    points: list[OffsetPoint]


@dataclass
class TxnBucket:
    """Transactions that ended in one time bucket: at their completion row, or at their invoke
    row when they have none; sorted by the contract's Terms as the stats are."""

    start_ns: int
    committed: int
    aborted: int
    unknown: int


# The anomalies whose examples the report shows with their transactions' rows: the five only
# transactions make, and aborted_read (a read_committed poll that saw an aborted transaction).
TXN_EXAMPLES = ("aborted_read", *TRANSACTION_ANOMALIES)
ROWS_PER_TXN = 40  # a transaction's rows the report shows; engines fetch one more to tell it


def example_txns(example: dict[str, Any]) -> list[int]:
    """The transactions an example is about, each once: its txn and txns fields, then the txn
    of each of its rows (an aborted read's send, a double processing's outputs), in that order."""
    named = [example.get("txn"), *example.get("txns", ()),
             *(row.get("txn") for row in example.get("rows", ()))]
    return list(dict.fromkeys(t for t in named if t is not None))


def report_txns(result: CheckResult) -> list[int]:
    """Every transaction the report's transactional examples name, each once, ascending."""
    return sorted({
        t
        for name in TXN_EXAMPLES
        for example in result.anomalies[name].examples
        for t in example_txns(example)
    })


@dataclass
class ReportData:
    """What the HTML report plots beyond the result; only computed when a report is asked for."""

    bucket_ns: int
    timeline: list[TimelineBucket]
    faults: list[FaultWindow]
    neighborhoods: list[Neighborhood]
    # The nemesis operations, fault paired with heal, for the report's table.
    nemesis: list[NemesisOp] = field(default_factory=list)
    # Only for a history with transactions: what ended per bucket (the same buckets as the
    # timeline), and the rows of each transaction an example names (report_txns), by txn: its
    # own txn rows and the rows made inside it, by time_ns, process, seq, at most
    # ROWS_PER_TXN + 1 (one more tells the report there were more).
    txn_timeline: list[TxnBucket] = field(default_factory=list)
    txn_rows: dict[int, list[dict[str, Any]]] = field(default_factory=dict)


def example_anchor(example: dict[str, Any]) -> tuple[str, int, int] | None:
    """The (topic, partition, offset) an example is about, for plotting the offsets around it."""
    if all(example.get(k) is not None for k in ("topic", "partition", "offset")):
        return example["topic"], example["partition"], example["offset"]
    for row in example.get("rows", ()):
        offset = row["offset"]
        positioned = row["partition"] >= 0 and offset is not None and offset >= 0
        if row["type"] == "ok" and row["f"] in ("send", "poll") and positioned:
            return row["topic"], row["partition"], row["offset"]
    return None


def fault_windows(nemesis: Iterable[tuple[int, int, str, str | None]] | Iterable[NemesisRow],
                  end_ns: int) -> list[FaultWindow]:
    """Fault windows from nemesis rows (time_ns, op, type, value[, error]), in the order the
    faults started; harness.checker.nemesis_ops pairs each fault with its heal."""
    return nemesis_ops.windows(nemesis_ops.operations(NemesisRow(*row) for row in nemesis),
                               end_ns)
