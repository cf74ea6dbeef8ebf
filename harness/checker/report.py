"""The check's verdict for people and for CI: single-file HTML, JUnit XML, JSON, a terminal table.

Every format is written from the same CheckResult, so they cannot disagree; files are written
under a temporary name and renamed, so a report directory never holds half a report.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from harness.checker import report_sections, report_txn, svg
from harness.checker.manifest import NO_MANIFEST, Provenance
from harness.checker.result import ANOMALIES, STATS, CheckResult, ReportData

_COLORS = dict(
    zip(
        ANOMALIES,
        (
            "#c1121f",
            "#6c757d",
            "#7b2cbf",
            "#e63946",
            "#d00000",
            "#9d0208",
            "#3a86ff",
            "#0096c7",
            "#f77f00",
            "#2a9d8f",
            "#8338ec",
            "#fb5607",
            "#ff006e",
            "#6a040f",
            "#3c096c",
            "#bc6c25",
            "#588157",
        ),
        strict=True,
    )
)
_ROW_COLUMNS = (
    "process",
    "seq",
    "op",
    "time_ns",
    "type",
    "f",
    "topic",
    "partition",
    "offset",
    "value",
    "group",
    "generation",
    "error",
)
_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px}h3{font-size:15px;margin-bottom:4px}
.verdict{display:inline-block;padding:4px 12px;border-radius:4px;color:#fff;font-weight:600}
.valid{background:#2a9d8f}.invalid{background:#c1121f}
table{border-collapse:collapse;margin:8px 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}
th{background:#f5f5f5}td.n{text-align:right}tr.fail td{background:#fde8e8}
tr.allowed td{background:#fff6e0}.rows td{font:12px monospace}
.chart{background:#fff;border:1px solid #eee}.tick,.legend{font-size:11px;fill:#555}
.axis{font-size:12px;fill:#333}.fields{font:12px monospace;color:#444}
.bar-label{font-size:11px;fill:#fff;font-weight:600}.bar-label-out{font-size:11px;fill:#333}
.swatch{display:inline-block;width:10px;height:10px;margin-right:5px;border-radius:2px}
.legend-list{list-style:none;padding:0;font-size:13px}.legend-list li{margin:2px 0}
pre.replay{background:#f5f5f5;padding:8px;white-space:pre-wrap;word-break:break-all}
"""


def status(result: CheckResult, name: str) -> str:
    """FAIL (present and forbidden), allowed (present, tolerated by the guarantee) or ok."""
    if not result.anomalies[name].count:
        return "ok"
    return "FAIL" if result.fails(name) else "allowed"


def _seconds(time_ns: int, origin: int) -> float:
    return (time_ns - origin) / 1e9


def _origin(result: CheckResult) -> int:
    """Time zero of every chart and table: the run's start, which the history's time_ns counts
    from (docs/history.md); an earlier row (a history made elsewhere) moves it back."""
    return min(0, result.stats.get("first_time_ns") or 0)


def _timeline(result: CheckResult, data: ReportData) -> str:
    if not data.timeline:
        return ("<p>No throughput or latency timeline: the history has no rows, or the engine "
                "that checked it (--engine python) does not compute one.</p>")
    origin = _origin(result)
    per_second = 1e9 / data.bucket_ns
    bands = report_sections.bands(data.faults, origin)
    marks = [
        svg.Mark(_seconds(max(r["time_ns"] for r in example["rows"]), origin), name, _COLORS[name])
        for name in ANOMALIES
        for example in result.anomalies[name].examples
        if example["rows"]
    ]

    def line(label: str, color: str, values: list[tuple[int, float | None]]) -> svg.Series:
        points = [(_seconds(t, origin), v) for t, v in values if v is not None]
        return svg.Series(label, color, points)

    buckets = data.timeline
    throughput = svg.Chart(
        "seconds since the run started",
        "per second",
        [
            line("sends ok", "#2a9d8f", [(b.start_ns, b.sends_ok * per_second) for b in buckets]),
            line(
                "records read",
                "#3a86ff",
                [(b.start_ns, b.records_read * per_second) for b in buckets],
            ),
            line(
                "sends failed/unknown",
                "#e76f51",
                [(b.start_ns, b.sends_failed * per_second) for b in buckets],
            ),
        ],
        bands,
        marks,
    )
    latency = svg.Chart(
        "seconds since the run started",
        "send latency ms",
        [
            line("mean", "#264653", [(b.start_ns, b.latency_mean_ms) for b in buckets]),
            line("p99", "#e9c46a", [(b.start_ns, b.latency_p99_ms) for b in buckets]),
        ],
        bands,
        marks,
    )
    legend = "".join(
        f'<span style="color:{_COLORS[n]}">&#9646; {n}</span> '
        for n in ANOMALIES
        if result.anomalies[n].examples
    )
    return (
        f"<h3>Throughput</h3>{svg.render(throughput)}<h3>Send latency</h3>{svg.render(latency)}"
        f"<p>Shaded: nemesis fault windows ({len(data.faults)}), coloured by kind of fault "
        f"(see Nemesis). Vertical lines: the first examples. {legend}</p>"
    )


def _rows_table(rows: list[dict[str, Any]]) -> str:
    head = "".join(f"<th>{c}</th>" for c in _ROW_COLUMNS)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{escape(str(r[c]) if r[c] is not None else '')}</td>" for c in _ROW_COLUMNS)
        + "</tr>"
        for r in rows
    )
    return f'<table class="rows"><tr>{head}</tr>{body}</table>'


def _neighborhood(result: CheckResult, data: ReportData, name: str, index: int) -> str:
    near = next((n for n in data.neighborhoods if n.anomaly == name and n.example == index), None)
    if near is None or not near.points:
        return ""
    origin = _origin(result)
    by_kind = {
        kind: [
            (_seconds(p.time_ns, origin), float(p.offset)) for p in near.points if p.kind == kind
        ]
        for kind in ("send", "read")
    }
    chart = svg.Chart(
        "seconds since the run started",
        f"offset in {near.topic}/{near.partition}",
        [
            svg.Series("acked by a send", "#2a9d8f", by_kind["send"], dots=True),
            svg.Series("read by a poll", "#3a86ff", by_kind["read"], dots=True),
        ],
        y_lines=[(float(near.offset), f"offset {near.offset}")],
        zero_based=False,
    )
    return svg.render(chart)


def _examples(result: CheckResult, data: ReportData) -> str:
    parts = []
    for name in ANOMALIES:
        anomaly = result.anomalies[name]
        if not anomaly.examples:
            continue
        parts.append(
            f'<h3 id="{name}">{name}: first {len(anomaly.examples)} of {anomaly.count}</h3>'
        )
        for index, example in enumerate(anomaly.examples):
            fields = ", ".join(f"{k}={v}" for k, v in example.items() if k != "rows")
            parts.append(f'<p class="fields">{escape(fields)}</p>')
            parts.append(_neighborhood(result, data, name, index))
            parts.append(_rows_table(example["rows"]))
    return "".join(parts) or "<p>No anomalies.</p>"


def render_html(
    result: CheckResult, data: ReportData, source: str, provenance: Provenance = NO_MANIFEST
) -> str:
    verdict = "VALID" if result.valid else "INVALID"
    rows = "".join(
        f'<tr class="{status(result, n).lower()}"><td><a href="#{n}">{n}</a></td>'
        f'<td class="n">{result.anomalies[n].count}</td>'
        f"<td>{'yes' if result.fails(n) else 'no'}</td>"
        f"<td>{status(result, n)}</td></tr>"
        for n in ANOMALIES
    )
    stats = "".join(f"<tr><td>{k}</td><td class='n'>{result.stats.get(k)}</td></tr>" for k in STATS)
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    end_ns = result.stats.get("last_time_ns") or 0
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>kafka-harness check: {verdict}</title><style>{_STYLE}</style></head><body>"
        f"<h1>Delivery check <span class='verdict {verdict.lower()}'>{verdict}</span></h1>"
        f"<p>Guarantee <b>{result.guarantee}</b> · history <code>{escape(source)}</code> · "
        f"{generated}</p>"
        f"<h2>Verdict per anomaly</h2><table><tr><th>anomaly</th><th>count</th>"
        f"<th>fails {result.guarantee}?</th><th>status</th></tr>{rows}</table>"
        f"<h2 id='run'>Run</h2>{report_sections.run_section(provenance)}"
        f"<h2>Timeline</h2>{_timeline(result, data)}"
        f"{report_txn.transactions_section(result, data, _origin(result))}"
        f"<h2 id='nemesis'>Nemesis</h2>"
        f"{report_sections.nemesis_section(data, _origin(result), end_ns, provenance)}"
        f"<h2>Examples</h2>{_examples(result, data)}"
        f"<h2>Stats</h2><table>{stats}</table></body></html>"
    )


def render_junit(result: CheckResult) -> str:
    """One testcase per anomaly name, so CI shows which guarantee broke and how often."""
    failures = len(result.failing)
    suites = ET.Element(
        "testsuites", name="kafka-harness check", tests=str(len(ANOMALIES)), failures=str(failures)
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=f"delivery.{result.guarantee}",
        tests=str(len(ANOMALIES)),
        failures=str(failures),
        errors="0",
        skipped="0",
    )
    for name in ANOMALIES:
        anomaly = result.anomalies[name]
        case = ET.SubElement(
            suite, "testcase", classname=f"delivery.{result.guarantee}", name=name, time="0"
        )
        examples = json.dumps(anomaly.examples, indent=1)
        if status(result, name) == "FAIL":
            failure = ET.SubElement(
                case,
                "failure",
                type=name,
                message=f"{anomaly.count} {name} under {result.guarantee}",
            )
            failure.text = examples
        elif anomaly.count:
            out = ET.SubElement(case, "system-out")
            out.text = f"{anomaly.count} {name}, allowed under {result.guarantee}\n{examples}"
    return ET.tostring(suites, encoding="unicode", xml_declaration=True)


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_reports(
    out_dir: Path,
    result: CheckResult,
    data: ReportData,
    source: str,
    provenance: Provenance = NO_MANIFEST,
    engine: dict[str, Any] | None = None,
) -> list[Path]:
    """report.html (with the run's seed, options and replay command when ``provenance`` has
    the run manifest), report.json (with ``engine``, the engine that judged, when given) and
    junit.xml."""
    out_dir.mkdir(parents=True, exist_ok=True)
    verdict = result.to_json() | ({"engine": engine} if engine is not None else {})
    written = {
        out_dir / "report.html": render_html(result, data, source, provenance),
        out_dir / "report.json": json.dumps(verdict, indent=1),
        out_dir / "junit.xml": render_junit(result),
    }
    for path, text in written.items():
        _write(path, text)
    return list(written)


def print_summary(console: Console, result: CheckResult, source: str, *,
                  judged_by: str | None = None) -> None:
    """The terminal verdict: every anomaly, how many, and whether it fails the guarantee; then
    the history's counts and, given ``judged_by``, the engine that judged and why."""
    verdict = "[bold green]VALID[/]" if result.valid else "[bold red]INVALID[/]"
    table = Table(title=f"{source}: {verdict} under {result.guarantee}", title_justify="left")
    table.add_column("anomaly")
    table.add_column("count", justify="right")
    table.add_column("status")
    table.add_column("first example")
    styles = {"FAIL": "[red]FAIL[/]", "allowed": "[yellow]allowed[/]", "ok": "[green]ok[/]"}
    for name in ANOMALIES:
        anomaly = result.anomalies[name]
        first = anomaly.examples[0] if anomaly.examples else {}
        summary = ", ".join(f"{k}={v}" for k, v in first.items() if k != "rows")
        table.add_row(name, str(anomaly.count), styles[status(result, name)], summary[:70])
    console.print(table)
    stats = result.stats
    console.print(
        f"{stats.get('rows')} rows, {stats.get('processes')} processes: {stats.get('sends')} sends "
        f"({stats.get('sends_ok')} ok, {stats.get('sends_fail')} fail, {stats.get('sends_info')} "
        f"unknown, {stats.get('sends_ok_unknown_offset')} ok without offset), "
        f"{stats.get('records_read')} records read, {stats.get('commits_ok')} commits, "
        f"{stats.get('nemesis_ops')} nemesis ops"
    )
    if stats.get("txns"):
        # Only a transactional history has them; any other reads as it always did.
        console.print(
            f"{stats['txns']} transactions ({stats.get('txns_committed')} committed, "
            f"{stats.get('txns_aborted')} aborted, {stats.get('txns_unknown')} unknown)"
        )
    if judged_by is not None:
        console.print(f"judged by {judged_by}", highlight=False)
