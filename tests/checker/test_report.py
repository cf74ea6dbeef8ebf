"""The reports: JUnit for CI, a terminal table, and an HTML page that really renders."""

from __future__ import annotations

import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import pytest
from rich.console import Console

from harness.checker import report, rules, synth
from harness.checker import spark as engine
from harness.checker.result import ANOMALIES, ReportData

from .histories import allowed_only, zoo

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _png_pixels(path: Path) -> bytes:
    """The decompressed scanlines of a PNG, enough to tell a page from a blank one."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = [], 8
    while at < len(data):
        (size,) = struct.unpack(">I", data[at : at + 4])
        kind = data[at + 4 : at + 8]
        if kind == b"IDAT":
            chunks.append(data[at + 8 : at + 8 + size])
        at += 12 + size
    return zlib.decompress(b"".join(chunks))


def screenshot(html: Path, tmp_path: Path) -> Path:
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'chromium'}",
            "--window-size=1200,2600",
            f"--screenshot={shot}",
            html.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return shot


def test_junit_has_one_testcase_per_anomaly():
    b, _ = zoo()
    root = ET.fromstring(report.render_junit(rules.check_events(b.events, "at-most-once")))
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert list(cases) == list(ANOMALIES)
    failed = {name for name, c in cases.items() if c.find("failure") is not None}
    assert failed == {
        "inconsistent_offset",
        "aborted_read",
        "phantom_read",
        "duplicate",
        "redelivery",
        "group_exclusivity",
    }
    assert root.get("failures") == "6"
    assert "allowed under at-most-once" in cases["lost_write"].find("system-out").text


def test_terminal_summary_names_every_anomaly():
    b, _ = allowed_only()
    console = Console(record=True, width=160)
    report.print_summary(console, rules.check_events(b.events), "history/")
    text = console.export_text()
    assert "VALID under at-least-once" in text
    for name in ANOMALIES:
        assert name in text
    assert "allowed" in text


def test_html_without_data_still_renders():
    b, _ = zoo()
    html = report.render_html(rules.check_events(b.events), ReportData(1, [], [], []), "h")
    assert html.startswith("<!DOCTYPE html>") and "INVALID" in html
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package")
def test_html_report_renders_in_chromium(spark, tmp_path):
    rates = {name: 0.0012 for name in synth.PLANTED}
    history = tmp_path / "history"
    synth.generate(history, synth.Spec(rows=60_000, partitions=2, rates=rates, unseen=0.01))
    result = engine.check(spark, history)
    data = engine.report_data(spark, history, result)
    assert data.timeline and data.faults and data.neighborhoods
    written = report.write_reports(tmp_path / "out", result, data, str(history))
    html = written[0]
    assert html.name == "report.html"
    text = html.read_text()
    assert text.count("<svg") >= 2 + len(data.neighborhoods)
    shot = screenshot(html, tmp_path)
    pixels = _png_pixels(shot)
    assert shot.stat().st_size > 20_000
    assert len(set(pixels[::101])) > 16, "the screenshot is blank"
