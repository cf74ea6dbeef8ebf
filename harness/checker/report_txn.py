"""The report's Transactions section: what became of the transactions over time, and the
transactions behind each transactional anomaly's examples, row by row.

A transactional anomaly is about transactions, not single rows: a torn transaction is seen
only next to all of its sends, a g1c cycle only next to the reads each transaction made inside
the other. So for each example of aborted_read, precommitted_read, torn_transaction, g1c,
double_processed and unprocessed, this section lists every transaction the example names with
its own rows (begin, commit or abort) and the rows made inside it, and g1c's explanation (the
cycle, edge by edge) above them. A history without transactions has no such section: its report
reads as it did before transactions existed.
"""

from __future__ import annotations

from html import escape
from typing import Any

from harness.checker import report_sections, svg
from harness.checker.nemesis_ops import FaultWindow
from harness.checker.result import (
    ROWS_PER_TXN,
    TXN_EXAMPLES,
    CheckResult,
    ReportData,
    TxnBucket,
    example_txns,
)
from harness.checker.rules_txn import TXN

# One colour per fate, the same in the chart and in the transactions' headings.
FATE_COLORS = {"committed": "#2a9d8f", "aborted": "#e76f51", "unknown": "#6c757d"}
# A transaction row's cells: when (seconds since the run started), who, what, where, which value.
_COLUMNS = ("time (s)", "process", "seq", "f", "type", "topic", "partition", "offset", "value",
            "isolation", "derived_from", "error")


def has_transactions(result: CheckResult, data: ReportData) -> bool:
    """Whether the report has a Transactions section: the history began a transaction, or an
    example names one (a send or read carrying a txn with no begin row of its own)."""
    return bool(result.stats.get("txns") or data.txn_timeline or data.txn_rows)


def _chart(buckets: list[TxnBucket], bucket_ns: int, faults: list[FaultWindow],
           origin: int) -> str:
    per_second = 1e9 / bucket_ns

    def series(fate: str, counts: list[tuple[int, int]]) -> svg.Series:
        points = [((t - origin) / 1e9, n * per_second) for t, n in counts]
        return svg.Series(fate, FATE_COLORS[fate], points)

    chart = svg.Chart(
        "seconds since the run started",
        "transactions ended per second",
        [
            series("committed", [(b.start_ns, b.committed) for b in buckets]),
            series("aborted", [(b.start_ns, b.aborted) for b in buckets]),
            series("unknown", [(b.start_ns, b.unknown) for b in buckets]),
        ],
        report_sections.bands(faults, origin),
    )
    return svg.render(chart)


def fate(rows: list[dict[str, Any]], txn: int) -> str:
    """What a transaction's own completion row says: ok, fail, info, or none at all."""
    end = next((r for r in rows if r["f"] == TXN and r["op"] == txn and r["type"] != "invoke"),
               None)
    return "no completion row (unknown)" if end is None else str(end["type"])


def _cell(row: dict[str, Any], column: str, origin: int) -> str:
    if column == "time (s)":
        return report_sections.seconds(row["time_ns"], origin)
    value = row.get(column)
    if value is None or (column == "partition" and value < 0):  # -1 is the contract's null
        return ""
    return escape(str(value))


def _txn_table(txn: int, rows: list[dict[str, Any]], origin: int) -> str:
    begin = next((r for r in rows if r["f"] == TXN and r["type"] == "invoke"), None)
    named = f" ({escape(str(begin['value']))})" if begin and begin.get("value") else ""
    more = (f"; first {ROWS_PER_TXN} rows of more" if len(rows) > ROWS_PER_TXN else "")
    head = "".join(f"<th>{c}</th>" for c in _COLUMNS)
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(r, c, origin)}</td>" for c in _COLUMNS) + "</tr>"
        for r in rows[:ROWS_PER_TXN]
    )
    return (
        f'<p class="txn-head" data-txn="{txn}"><b>T{txn}</b>{named}: '
        f"{escape(fate(rows, txn))}{more}</p>"
        f'<table class="txn-rows" data-txn="{txn}"><tr>{head}</tr>{body}</table>'
    )


def _examples(result: CheckResult, data: ReportData, origin: int) -> str:
    parts = []
    for name in TXN_EXAMPLES:
        examples = [(i, e, example_txns(e)) for i, e in enumerate(result.anomalies[name].examples)]
        examples = [(i, e, txns) for i, e, txns in examples if txns]
        if not examples:
            continue
        parts.append(f'<h3 id="txn-{name}"><a href="#{name}">{name}</a></h3>')
        for index, example, txns in examples:
            fields = ", ".join(f"{k}={v}" for k, v in example.items()
                               if k not in ("rows", "cycle"))
            parts.append(f'<div class="txn-example" data-anomaly="{name}" data-example="{index}">'
                         f'<p class="fields">{escape(fields)}</p>')
            if example.get("cycle"):
                parts.append(f'<p class="cycle">Cycle: {escape(str(example["cycle"]))}</p>')
            for txn in txns:
                rows = data.txn_rows.get(txn, [])
                parts.append(_txn_table(txn, rows, origin) if rows else
                             f'<p class="txn-head" data-txn="{txn}"><b>T{txn}</b>: '
                             f"no row of the history names it</p>")
            parts.append("</div>")
    return "".join(parts) or "<p>No transactional anomaly.</p>"


def transactions_section(result: CheckResult, data: ReportData, origin: int) -> str:
    """The section's HTML (its heading included), or nothing for a history without
    transactions."""
    if not has_transactions(result, data):
        return ""
    stats = result.stats
    counts = (
        f'<p class="txn-counts">{stats.get("txns")} transactions began: '
        f'{stats.get("txns_committed")} committed, {stats.get("txns_aborted")} aborted, '
        f'{stats.get("txns_unknown")} unknown.</p>'
    )
    chart = (_chart(data.txn_timeline, data.bucket_ns, data.faults, origin)
             if data.txn_timeline else "<p>No transaction began in the history.</p>")
    return (
        f"<h2 id='transactions'>Transactions</h2>{counts}{chart}"
        f"<p>Per time bucket, the transactions that ended in it (at their commit or abort "
        f"row, or where they began when they have none): committed, aborted, unknown as the "
        f"stats count them. Shaded: nemesis fault windows.</p>"
        f"<h3>The transactions behind the examples</h3>"
        f"<p>Each transaction an example names: its begin and end rows and every row made "
        f"inside it, by time.</p>{_examples(result, data, origin)}"
    )
