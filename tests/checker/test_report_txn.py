"""report.html's Transactions section, read back from the produced page: the transactions'
fates over time with the fault windows, and every transaction behind a transactional anomaly's
examples with its rows (g1c's cycle explained above them); absent from a history without
transactions. Both engines gather the same data for it."""

from __future__ import annotations

from pathlib import Path

from harness.checker import python_engine, report
from harness.checker import spark as spark_engine
from harness.checker.report_txn import FATE_COLORS
from harness.checker.result import TXN_EXAMPLES

from .histories import RC, Builder, transactions, zoo
from .html_page import Page, parse


def _planted() -> Builder:
    """The zoo's transaction anomalies, plus an aborted transaction a read_committed poll read
    (aborted_read), one left unknown, one unknown but read (committed), transactional
    consume-transform-produce steps, and a fault while they ran."""
    b = Builder()
    b.nemesis("partition {1} | {2}")
    transactions(b)
    t = b.begin(40, "tx-abort")
    b.send(40, "g1a-a", 0, topic="g1a", txn=t)
    b.send(40, "g1a-b", 0, topic="g1a", partition=1, txn=t)
    b.end(40, t, "fail")
    b.poll(41, [(0, "g1a-a")], topic="g1a", isolation=RC)
    t = b.begin(42, "tx-unknown")
    b.send(42, "unk-a", 0, topic="unk", txn=t)
    b.end(42, t, "info")
    t = b.begin(43, "tx-seen")  # unknown to its client, yet read: committed
    b.send(43, "seen-a", 0, topic="seen", txn=t)
    b.end(43, t, "info")
    b.poll(44, [(0, "seen-a")], topic="seen", isolation=RC)
    # Consume-transform-produce in transactions: ip-a processed twice (by 50, then by 51 in a
    # later generation), ip-b read and not processed below the processed ip-c.
    for offset, value in enumerate(("ip-a", "ip-b", "ip-c")):
        b.send(9, value, offset, topic="ctp")
    for process, generation, offset, value, out in (
        (50, 1, 0, "ip-a", "out-a"), (51, 2, 0, "ip-a", "out-a2"), (50, 1, 1, "ip-b", None),
        (50, 1, 2, "ip-c", "out-c"),
    ):
        t = b.begin(process, f"tx-{process}")
        b.poll(process, [(offset, value)], topic="ctp", group="gp", generation=generation,
               txn=t, isolation=RC)
        if out is not None:
            b.send(process, out, None, topic="ctp-out", group="gp", derived_from=value, txn=t)
        b.end(process, t)
    b.nemesis("heal")
    return b


def _page(tmp_path: Path, b: Builder) -> tuple[Page, str]:
    history = b.write(tmp_path / "history")
    result, data = python_engine.check(history, "at-least-once")
    out = tmp_path / "report"
    report.write_reports(out, result, data, str(history))
    html = (out / "report.html").read_text(encoding="utf-8")
    return parse(html), html


def _tables(page: Page, html: str) -> dict[int, list[list[str]]]:
    """Each transaction's table by its txn (html_page merges tables of one class)."""
    found: dict[int, list[list[str]]] = {}
    for chunk in html.split('<table class="txn-rows" data-txn="')[1:]:
        txn, rest = chunk.split('"', 1)
        found[int(txn)] = parse(f'<table class="t"{rest.split("</table>")[0]}</table>').tables["t"]
    return found


def test_the_transactions_section_shows_fates_over_time_and_each_examples_transactions(tmp_path):
    page, html = _page(tmp_path, _planted())

    assert page.find("h2", id="transactions")
    [counts] = page.find("p", class_="txn-counts")
    # precommitted, torn, the cycle's two, the aborted one, the
    # unknown one, the unknown one read (so committed), four processing.
    assert counts.text == "11 transactions began: 9 committed, 1 aborted, 1 unknown."
    chart = page.elements.index(page.find("h2", id="transactions")[0])
    svg = next(e for e in page.elements[chart:] if e.tag == "svg")
    after = page.elements[page.elements.index(svg):]
    lines = {e.attrs["stroke"] for e in after[:200] if e.tag == "polyline"}
    assert lines == set(FATE_COLORS.values())
    bands = [e for e in after[:200] if e.tag == "rect" and e.attrs.get("opacity") == "0.25"]
    assert len(bands) == 1 and "partition" in bands[0].text

    examples = {(e.attrs["data-anomaly"]): e for e in page.find("div", class_="txn-example")}
    assert set(examples) == set(TXN_EXAMPLES)
    tables = _tables(page, html)
    # g1c: the cycle explained, and both transactions with the read each made of the other.
    [cycle] = page.find("p", class_="cycle")
    t1, t2 = sorted(t for t, rows in tables.items() if any("cyc-" in c for r in rows for c in r))
    assert cycle.text == (f"Cycle: T{t2} read T{t1}'s value 'cyc-a' at cyc/0/0; "
                          f"T{t1} read T{t2}'s value 'cyc-b' at cyc/1/0")
    header = tables[t1][0]
    assert header == ["time (s)", "process", "seq", "f", "type", "topic", "partition", "offset",
                      "value", "isolation", "derived_from", "error"]

    def cells(txn: int) -> list[tuple[str, ...]]:
        return [(r[3], r[4], r[5], r[6], r[7], r[8], r[9]) for r in tables[txn][1:]]

    assert cells(t1) == [
        ("txn", "invoke", "", "", "", "tx", ""),
        ("send", "invoke", "cyc", "", "", "cyc-a", ""),
        ("send", "ok", "cyc", "0", "0", "cyc-a", ""),
        ("poll", "invoke", "", "", "", "", RC),
        ("poll", "ok", "cyc", "1", "0", "cyc-b", RC),
        ("txn", "ok", "", "", "", "", ""),
    ]
    # The aborted transaction behind the aborted read: both its sends and its abort.
    aborted = examples["aborted_read"]
    assert "value=g1a-a" in aborted.text and "tx-abort" in aborted.text and ": fail" in aborted.text
    [t_abort] = [t for t, rows in tables.items() if any("g1a-b" in r for r in rows)]
    assert [r[8] for r in tables[t_abort][1:] if r[3] == "send" and r[4] == "ok"] == [
        "g1a-a", "g1a-b"]
    # The torn transaction: the read send and the unread one below it.
    torn = examples["torn_transaction"]
    assert "value=torn-a" in torn.text
    [t_torn] = [t for t, rows in tables.items() if any("torn-b" in r for r in rows)]
    assert [r[8] for r in tables[t_torn][1:] if r[3] == "send" and r[4] == "ok"] == [
        "torn-a", "torn-b"]
    # Processing: both transactions that made an output of ip-a; the one that read ip-b.
    double = examples["double_processed"]
    assert "value=ip-a" in double.text and "outputs=2" in double.text
    assert [r[8] for t in example_txns_of(page, "double_processed") for r in tables[t][1:]
            if r[3] == "send" and r[4] == "ok"] == ["out-a", "out-a2"]
    undone = examples["unprocessed"]
    assert "value=ip-b" in undone.text
    [t_undone] = example_txns_of(page, "unprocessed")
    assert [r[8] for r in tables[t_undone][1:] if r[3] == "poll" and r[4] == "ok"] == ["ip-b"]


def example_txns_of(page: Page, anomaly: str) -> list[int]:
    """The transactions listed under the first example of an anomaly, in order."""
    [div] = [e for e in page.find("div", class_="txn-example")
             if e.attrs["data-anomaly"] == anomaly]
    start = page.elements.index(div)
    txns = []
    for e in page.elements[start + 1:]:
        if e.tag == "div":
            break
        if e.tag == "p" and e.attrs.get("class") == "txn-head":
            txns.append(int(e.attrs["data-txn"]))
    return txns


def test_a_history_without_transactions_has_no_transactions_section(tmp_path):
    page, html = _page(tmp_path, zoo()[0])
    assert not page.find("h2", id="transactions")
    assert "txn-rows" not in html and "Transactions" not in page.text
    # Its aborted_read (a failed send, no transaction) is an example like any other.
    assert page.find("h3", id="aborted_read")


def test_the_fates_over_time_add_up_to_the_stats(tmp_path):
    history = _planted().write(tmp_path)
    result, data = python_engine.check(history, "at-least-once")
    totals = [sum(getattr(b, fate) for b in data.txn_timeline) for fate in FATE_COLORS]
    stats = result.stats
    assert totals == [stats["txns_committed"], stats["txns_aborted"], stats["txns_unknown"]]
    assert len(data.txn_timeline) > 1  # spread over time, not one bucket


def test_spark_gathers_the_same_transaction_data_as_python(spark, tmp_path):
    """The SQL (harness.checker.sql.txn_timeline, txn_rows) against the pure-Python
    (harness.checker.timeline), on the same result: only the report's queries run here."""
    history = _planted().write(tmp_path, split=True)
    result, python = python_engine.check(history, "at-least-once")
    gathered = spark_engine.report_data(spark, history, result)
    assert gathered.txn_timeline == python.txn_timeline
    assert gathered.txn_rows == python.txn_rows
    assert python.txn_rows  # every example's transaction was found
