"""What report.html tells its reader, read back from the produced file: the faults by kind (a
colour and a label each, with a legend), a table of every nemesis operation, and the seed, the
options and the command that repeats the run — or, for a history without a run manifest, that
the seed is unknown."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.checker import manifest, report
from harness.checker.nemesis_ops import FaultKind
from harness.checker.report_sections import FAULT_COLORS
from harness.checker.result import SCHEMA_VERSION
from harness.nemesis.schedule import FAULTS, Step
from harness.run import replay, runner
from harness.workload.group_protocol import GroupProtocol

from .histories import Builder
from .html_page import Page, parse

S = 1_000_000_000
# The harness nemesis' own descriptions (schedule.Step), with what became of each operation:
# (description, invoke s, completion s or None, completion type, error).
NEMESIS = [
    ("partition halves", 2.0, 2.01, "ok", None),
    ("heal partition halves", 5.0, 5.02, "ok", None),
    ("kill broker-2", 6.0, 6.1, "ok", None),
    ("heal kill broker-2", 9.0, 9.5, "info", "TimeoutError"),
    ("latency leader of t-0", 10.0, 10.01, "ok", None),
    ("heal latency leader of t-0", 12.0, 12.01, "ok", None),
    ("lose-unflushed broker-3", 13.0, 13.4, "ok", None),
    ("heal lose-unflushed broker-3", 13.5, 13.5, "ok", None),
    ("crash-client client", 14.0, 14.01, "ok", None),
    ("heal crash-client client", 14.5, 14.5, "ok", None),
    ("pause broker-1", 15.0, 15.2, "info", "FaultFailed"),
    ("<script>alert(1)</script> & co", 16.0, None, "", None),
    ("heal all", 18.0, 18.1, "ok", None),
]


def _history(directory: Path) -> Path:
    b = Builder()
    for i in range(20):
        op = b.send(1, f"v{i}", i)
        b.poll(2, [(i, f"v{i}")])
        del op
    ops = iter(range(10_000, 20_000))
    for what, start, end, type_, error in NEMESIS:
        op = next(ops)
        b.row(0, op, "invoke", "nemesis", value=what, time_ns=int(start * S))
        if end is not None:
            b.row(0, op, type_, "nemesis", value=what, error=error, time_ns=int(end * S))
    return b.write(directory)


def _report(tmp_path: Path, provenance: manifest.Provenance) -> Page:
    history = _history(tmp_path / "history")
    result, data = runner.check_history(history, "at-least-once", engine="python")
    out = tmp_path / "report"
    report.write_reports(out, result, data, str(history), provenance)
    return parse((out / "report.html").read_text(encoding="utf-8"))


def _manifest(options: runner.RunOptions, seed: int = 42) -> manifest.RunManifest:
    argv, caveats = replay.replay_command(options, seed)
    accounts = [manifest.NemesisAccount("partition halves", "4 directed links cut"),
                manifest.NemesisAccount("heal partition halves", "healed"),
                manifest.NemesisAccount("lose-unflushed broker-3",
                                        "node=broker-3, pid=7, offsets_lost=17")]
    return manifest.RunManifest("run-abc", seed, options.seed is not None,
                                json.loads(json.dumps(options.__dict__, default=str)), argv,
                                caveats, accounts)


def test_every_fault_kind_has_its_own_colour_and_the_nemesis_meaning():
    kinds = {str(k) for k in FaultKind} - {"other", "heal"}
    assert kinds == set(FAULTS), "the report's kinds must be the nemesis' faults"
    assert len(set(FAULT_COLORS.values())) == len(FaultKind) == len(FAULT_COLORS)


def test_fault_windows_are_coloured_and_labelled_by_kind_with_a_legend(tmp_path):
    page = _report(tmp_path, manifest.NO_MANIFEST)

    legend = {e.attrs["data-kind"]: e.text for e in page.find("li", class_="fault-kind")}
    assert list(legend) == ["partition", "kill", "pause", "lose-unflushed", "latency",
                            "crash-client", "other"]
    assert FAULTS["kill"] in legend["kill"] and "does not name" in legend["other"]
    # The lanes chart: one lane per kind, one bar per fault in its kind's colour, labelled
    # with its target and titled with the fault and when it held.
    bars = page.find("g", class_="bar")
    assert len(bars) == 7
    by_label = {}
    for bar in bars:
        rect = next(e for e in page.elements[page.elements.index(bar):] if e.tag == "rect")
        by_label[bar.text.split(":")[0]] = (rect.attrs["fill"], bar.text)
    assert by_label["partition halves"][0] == FAULT_COLORS[FaultKind.PARTITION]
    assert "broker-2" in by_label["kill broker-2"][1]
    assert by_label["kill broker-2"][0] == FAULT_COLORS[FaultKind.KILL]
    assert "2.000 s to 5.020 s" in by_label["partition halves"][1]
    assert "6.000 s to 9.500 s" in by_label["kill broker-2"][1]  # until the heal completed
    assert by_label["latency leader of t-0"][0] == FAULT_COLORS[FaultKind.LATENCY]
    assert by_label["lose-unflushed broker-3"][0] == FAULT_COLORS[FaultKind.LOSE_UNFLUSHED]
    assert by_label["crash-client client"][0] == FAULT_COLORS[FaultKind.CRASH_CLIENT]
    assert "15.000 s to 18.100 s" in by_label["pause broker-1"][1]  # ended by heal all
    chart = page.elements.index(page.find("svg", class_="chart lanes")[0])
    lanes = [e.text for e in page.elements[chart:] if e.tag == "text" and
             e.attrs.get("class") == "axis"]
    assert lanes[:7] == ["partition", "kill", "pause", "lose-unflushed", "latency",
                         "crash-client", "other"]


def test_the_nemesis_table_has_every_operation_with_times_target_and_outcome(tmp_path):
    page = _report(tmp_path, manifest.Provenance(_manifest(runner.RunOptions(seed=42))))

    header, *rows = page.tables["nemesis"]
    assert header == ["#", "fault", "target", "started (s)", "applied (s)", "healed (s)",
                      "outcome", "what the nemesis reported"]
    assert [r[1:6] for r in rows] == [
        ["partition", "halves", "2.000", "2.010", "5.020"],
        ["kill", "broker-2", "6.000", "6.100", "9.500"],
        ["latency", "leader of t-0", "10.000", "10.010", "12.010"],
        ["lose-unflushed", "broker-3", "13.000", "13.400", "13.500"],
        ["crash-client", "client", "14.000", "14.010", "14.500"],
        ["pause", "broker-1", "15.000", "15.200", "18.100"],
        ["other", "<script>alert(1)</script> & co", "16.000", "", "18.100"],
        ["heal", "all", "18.000", "18.100", ""],
    ]
    outcomes = [r[6] for r in rows]
    assert outcomes[0] == "ok; heal ok"
    assert outcomes[1] == "ok; heal info (TimeoutError)"
    assert outcomes[5] == "info (FaultFailed); heal ok"
    assert outcomes[6] == "no completion row; heal ok"
    assert rows[0][7] == "4 directed links cut"  # the nemesis' account, from the manifest
    assert rows[3][7] == "node=broker-3, pid=7, offsets_lost=17"


def test_history_values_are_escaped_not_markup(tmp_path):
    page = _report(tmp_path, manifest.Provenance(_manifest(runner.RunOptions(
        seed=1, master="spark://<b>x</b>:1"))))
    html = (tmp_path / "report" / "report.html").read_text()
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in html
    assert "<b>x</b>" not in html and "spark://&lt;b&gt;x&lt;/b&gt;:1" in html
    assert "--master 'spark://<b>x</b>:1'" in page.find("pre", class_="replay")[0].text
    assert dict(page.tables["options"])["master"] == '"spark://<b>x</b>:1"'


def test_the_report_shows_the_seed_options_and_replay_command(tmp_path):
    options = runner.RunOptions(duration_s=30, nemesis=("partition", "lose-unflushed"),
                                brokers=5, guarantee="exactly-once", suites=("protocol",))
    page = _report(tmp_path, manifest.Provenance(_manifest(options, seed=9876)))

    seed = page.find("p", class_="seed")[0].text
    assert "Seed: 9876 (chosen at random by the run)" in seed and "run-abc" in seed
    command = page.find("pre", class_="replay")[0].text
    assert command.startswith("kafka-harness run --duration 30 --brokers 5 "
                              "--nemesis partition,lose-unflushed --seed 9876 "
                              "--guarantee exactly-once ")
    assert "--suites protocol" in command and "--dir" not in command
    assert "does not repeat the run exactly" not in page.text
    options_table = dict(page.tables["options"])
    assert options_table["seed"] == "null" and options_table["brokers"] == "5"
    assert options_table["nemesis"] == '["partition", "lose-unflushed"]'


def test_a_replay_that_cannot_be_exact_says_why(tmp_path):
    options = runner.RunOptions(seed=3, static_members=True, compression="zstd",
                                schedule=(Step(1.0, 2.0, "kill", "controller"),))
    page = _report(tmp_path, manifest.Provenance(_manifest(options, seed=3)))
    assert "Seed: 3 (given with --seed)" in page.find("p", class_="seed")[0].text
    assert "does not repeat the run exactly" in page.text
    items = [li.text for li in page.find("li") if "command line" in li.text]
    assert len(items) == 3
    assert any("fixed schedule" in i for i in items) and any("zstd" in i for i in items)


def test_a_bare_history_reports_the_seed_as_unknown(tmp_path):
    provenance = manifest.read(_history(tmp_path / "bare"))
    assert provenance.manifest is None
    page = _report(tmp_path, provenance)
    seed = page.find("p", class_="seed")[0].text
    assert "Seed: unknown" in seed and manifest.FILE_NAME in seed
    assert not page.find("pre", class_="replay")


def test_an_unreadable_manifest_is_reported_not_trusted(tmp_path):
    history = _history(tmp_path / "history")
    (history / manifest.FILE_NAME).write_text('{"schema_version": 99, "seed": 5}')
    provenance = manifest.read(history)
    assert provenance.manifest is None and "schema_version 99" in (provenance.problem or "")


@pytest.mark.parametrize("options", [
    runner.RunOptions(),
    runner.RunOptions(duration_s=12.5, brokers=1, nemesis=(), seed=77, guarantee="at-most-once",
                      partitions=7, producers=3, consumers=4, rate=33.3, consumer_mode="assign",
                      commit="before", acks="1", idempotence=False, engine="python",
                      master="local[2]", network="kernel", backend="docker",
                      suites=("protocol", "groups"), target="apache-kafka"),
    runner.RunOptions(group_protocol=GroupProtocol.CONSUMER, target="apache-kafka-kraft"),
], ids=["defaults", "every-option-changed", "kip848-consumers"])
def test_the_replay_command_builds_the_same_options_in_the_real_cli(monkeypatch, options):
    """The command goes through the CLI's own parser; the RunOptions it builds must be the run's
    (with the seed the run used, and a run directory of its own)."""
    from harness.cli import app

    built: list[runner.RunOptions] = []

    def capture(opts: runner.RunOptions, *, as_json: bool = False) -> int:
        built.append(opts)
        return 0

    monkeypatch.setattr(runner, "run", capture)
    argv, caveats = replay.replay_command(options, 1234)
    assert argv[:2] == ["kafka-harness", "run"] and caveats == []
    done = CliRunner().invoke(app, argv[1:])
    assert done.exit_code == 0, done.output
    expected = replace(options, seed=1234, run_dir=None)
    assert [replace(b, run_dir=None) for b in built] == [expected]


def test_check_reads_the_manifest_next_to_the_history(check_here, tmp_path):
    """`kafka-harness check --report` on a run's history (the program's entry point, in this
    process on the shared Spark session; test_cli runs it as a subprocess): the report names
    the run's seed and replay command; report.json carries the schema version."""
    history = _history(tmp_path / "history")
    written = manifest.write(history, _manifest(runner.RunOptions(seed=31), seed=31))
    assert json.loads(written.read_text())["schema_version"] == SCHEMA_VERSION
    out = tmp_path / "report"
    done = check_here(str(history), "--report", str(out), "--json")
    assert done.code == 0, done.stderr
    page = parse((out / "report.html").read_text(encoding="utf-8"))
    assert "Seed: 31 (given with --seed)" in page.find("p", class_="seed")[0].text
    assert "--seed 31" in page.find("pre", class_="replay")[0].text
    assert len(page.tables["nemesis"]) == 1 + 8
    assert json.loads((out / "report.json").read_text())["schema_version"] == SCHEMA_VERSION


def test_a_python_engine_report_shades_coloured_fault_windows_on_its_charts(tmp_path):
    page = _report(tmp_path, manifest.NO_MANIFEST)
    assert "No throughput" not in page.text
    charts = page.find("svg", class_="chart")
    assert len(charts) == 2  # throughput and latency; the lanes chart is class "chart lanes"
    shaded = [e for e in page.elements if e.tag == "rect" and e.attrs.get("opacity") == "0.25"]
    assert len(shaded) == 2 * 7  # every fault window on both charts
    assert {e.attrs["fill"] for e in shaded} == {
        FAULT_COLORS[k] for k in (FaultKind.PARTITION, FaultKind.KILL, FaultKind.PAUSE,
                                  FaultKind.LOSE_UNFLUSHED, FaultKind.LATENCY,
                                  FaultKind.CRASH_CLIENT, FaultKind.OTHER)}
    assert "kill broker-2" in {e.text for e in shaded}


def test_both_engines_give_the_report_the_same_nemesis_and_timeline(spark, tmp_path):
    """The Spark engine's report inputs (SQL) and the Python engine's (harness.checker.timeline,
    nemesis_ops on the rows) agree: the same operations and windows, the same buckets."""
    from harness.checker import spark as engine
    from harness.checker import synth

    history = _history(tmp_path / "history")
    _, python_data = runner.check_history(history, "at-least-once", engine="python")
    data = engine.report_data(spark, history, engine.check(spark, history))
    assert data.nemesis == python_data.nemesis and len(data.nemesis) == 8
    assert data.faults == python_data.faults
    assert (data.bucket_ns, data.timeline) == (python_data.bucket_ns, python_data.timeline)

    big = tmp_path / "synth"
    synth.generate(big, synth.Spec(rows=10_000, partitions=2, rates={}, unseen=0.0))
    _, python_data = runner.check_history(big, "at-least-once", engine="python")
    data = engine.report_data(spark, big, engine.check(spark, big))
    assert data.bucket_ns == python_data.bucket_ns and len(data.timeline) > 20
    assert [(b.start_ns, b.sends_ok, b.sends_failed, b.records_read) for b in data.timeline] == \
        [(b.start_ns, b.sends_ok, b.sends_failed, b.records_read) for b in python_data.timeline]
    for ours, theirs in zip(python_data.timeline, data.timeline, strict=True):
        assert ours.latency_mean_ms == pytest.approx(theirs.latency_mean_ms)
        assert ours.latency_p99_ms == pytest.approx(theirs.latency_p99_ms)
    assert data.faults == python_data.faults and data.faults
