"""The report's sections about what was done to the system under test: the nemesis' faults (a
chart with one lane and one colour per kind of fault, and a table of every operation) and the run
that made the history (seed, options, the command that repeats it).

A reader of a failed run's report asks "what was the cluster going through when this broke?" and
"how do I make it happen again?"; these sections answer both from the history's nemesis rows and
the run manifest next to the history. Everything that comes from the history or the manifest is
escaped: a nemesis value or an option is data, never markup.
"""

from __future__ import annotations

import json
import shlex
from html import escape

from harness.checker import svg
from harness.checker.manifest import NemesisAccount, Provenance, RunManifest
from harness.checker.nemesis_ops import Action, FaultKind, FaultWindow, NemesisOp, Outcome
from harness.checker.result import ReportData
from harness.nemesis.schedule import FAULTS

# One colour per kind of fault, the same in every chart and in the legend.
FAULT_COLORS: dict[FaultKind, str] = {
    FaultKind.PARTITION: "#e76f51",
    FaultKind.KILL: "#9d0208",
    FaultKind.PAUSE: "#7b2cbf",
    FaultKind.STOP: "#3a5a40",
    FaultKind.LOSE_UNFLUSHED: "#ff006e",
    FaultKind.LATENCY: "#f4a261",
    FaultKind.BANDWIDTH: "#e9c46a",
    FaultKind.CRASH_CLIENT: "#0077b6",
    FaultKind.DISK_FULL: "#6f4518",
    FaultKind.DISK_ERRORS: "#b5179e",
    FaultKind.DELAYED_END_TXN: "#264653",
    FaultKind.OTHER: "#6c757d",
    FaultKind.HEAL: "#2a9d8f",
}
_OTHER_MEANS = "a fault the harness's nemesis does not name (a history made elsewhere)"


def fault_meaning(kind: FaultKind) -> str:
    return FAULTS.get(str(kind), _OTHER_MEANS)


def seconds(time_ns: int | None, origin: int) -> str:
    return "" if time_ns is None else f"{(time_ns - origin) / 1e9:.3f}"


def bands(faults: list[FaultWindow], origin: int) -> list[svg.Band]:
    """The fault windows as shaded spans of a time chart, coloured by kind."""
    return [
        svg.Band((w.start_ns - origin) / 1e9, (w.end_ns - origin) / 1e9, w.what,
                 FAULT_COLORS[w.kind])
        for w in faults
    ]


def legend(kinds: list[FaultKind]) -> str:
    items = "".join(
        f'<li class="fault-kind" data-kind="{escape(str(k))}">'
        f'<span class="swatch" style="background:{FAULT_COLORS[k]}"></span>'
        f"<b>{escape(str(k))}</b>: {escape(fault_meaning(k))}</li>"
        for k in kinds
    )
    return f'<ul class="legend-list">{items}</ul>'


def present_kinds(data: ReportData) -> list[FaultKind]:
    """The kinds of fault the history has, in the enum's order."""
    seen = {w.kind for w in data.faults}
    return [k for k in FaultKind if k in seen]


def _lanes(data: ReportData, origin: int, end_ns: int) -> str:
    kinds = present_kinds(data)
    lane = {k: i for i, k in enumerate(kinds)}
    bars = [
        svg.Bar(lane[w.kind], (w.start_ns - origin) / 1e9, (w.end_ns - origin) / 1e9,
                w.target or w.what, FAULT_COLORS[w.kind],
                f"{w.what}: {seconds(w.start_ns, origin)} s to {seconds(w.end_ns, origin)} s")
        for w in data.faults
    ]
    return svg.render_lanes([str(k) for k in kinds], bars, "seconds since the run started",
                            (0.0, (end_ns - origin) / 1e9))


def _outcome(action: Action) -> str:
    if action.outcome is Outcome.OK:
        return "ok"
    if action.outcome is Outcome.PENDING:
        return "no completion row"
    return f"{action.outcome}" + (f" ({action.error})" if action.error else "")


def _accounts(ops: list[NemesisOp], accounts: list[NemesisAccount]) -> dict[int, str]:
    """The nemesis' own account of each fault (from the manifest), by op: the n-th account of
    a description goes with the n-th operation of that description."""
    queues: dict[str, list[NemesisAccount]] = {}
    for account in accounts:
        queues.setdefault(account.what, []).append(account)

    def take(description: str) -> str:
        queue = queues.get(description)
        if not queue:
            return ""
        account = queue.pop(0)
        return account.error or account.result or ""

    said: dict[int, str] = {}
    for op in ops:
        said[op.action.op] = take(op.action.description)
        if op.heal is not None:
            heal = take(op.heal.description)
            if heal and heal != "healed":
                said[op.action.op] += f"; heal: {heal}"
    return said


def _row(number: int, op: NemesisOp, origin: int, said: str) -> str:
    a, heal = op.action, op.heal
    if op.kind is FaultKind.HEAL:
        outcome, healed = _outcome(a), ""
    elif heal is None:
        outcome, healed = f"{_outcome(a)}; not healed by the end of the history", ""
    else:
        outcome = f"{_outcome(a)}; heal {_outcome(heal)}"
        healed = seconds(heal.ended_ns if heal.ended_ns is not None else heal.started_ns, origin)
    bad = a.outcome is not Outcome.OK or (heal is not None and heal.outcome is not Outcome.OK)
    cells = (
        f'<td class="n">{number}</td>'
        f'<td><span class="swatch" style="background:{FAULT_COLORS[op.kind]}"></span>'
        f"{escape(str(op.kind))}</td><td>{escape(op.target)}</td>"
        f'<td class="n">{seconds(a.started_ns, origin)}</td>'
        f'<td class="n">{seconds(a.ended_ns, origin)}</td><td class="n">{healed}</td>'
        f"<td>{escape(outcome)}</td><td>{escape(said)}</td>"
    )
    return f'<tr class="{"allowed" if bad else "op"}" data-op="{a.op}">{cells}</tr>'


def nemesis_section(data: ReportData, origin: int, end_ns: int,
                    provenance: Provenance) -> str:
    """The faults: the lanes chart with its legend, and one table row per nemesis operation."""
    if not data.nemesis:
        return "<p>The history has no nemesis operations: no fault was injected.</p>"
    accounts = provenance.manifest.nemesis if provenance.manifest is not None else []
    said = _accounts(data.nemesis, accounts)
    rows = "".join(_row(i, op, origin, said.get(op.action.op, ""))
                   for i, op in enumerate(data.nemesis, 1))
    chart = _lanes(data, origin, end_ns) if data.faults else ""
    return (
        f"{chart}{legend(present_kinds(data))}"
        f'<table class="nemesis"><tr><th>#</th><th>fault</th><th>target</th>'
        f"<th>started (s)</th><th>applied (s)</th><th>healed (s)</th><th>outcome</th>"
        f"<th>what the nemesis reported</th></tr>{rows}</table>"
        f"<p>Times are seconds since the run started: started = the operation's invoke row, "
        f"applied = its completion row, healed = the completion of the heal that ended it. "
        f"A fault window (the shading in the charts) runs from started to healed.</p>"
    )


def _options_table(manifest: RunManifest) -> str:
    rows = "".join(
        f"<tr><td>{escape(name)}</td><td><code>{escape(json.dumps(value))}</code></td></tr>"
        for name, value in manifest.options.items()
    )
    return f'<table class="options">{rows}</table>'


def run_section(provenance: Provenance) -> str:
    """Seed, options and the replay command; or, without a manifest, that the seed is unknown."""
    manifest = provenance.manifest
    if manifest is None:
        return (
            f'<p class="seed">Seed: <b>unknown</b>. {escape(provenance.problem or "")}. '
            f"Without the run's manifest the report cannot say which seed and options made "
            f"this history, nor how to replay it.</p>"
        )
    how = "given with --seed" if manifest.seed_given else "chosen at random by the run"
    caveats = "".join(f"<li>{escape(c)}</li>" for c in manifest.replay_caveats)
    exact = (
        f'<p class="caveats">This command does <b>not</b> repeat the run exactly:</p>'
        f"<ul>{caveats}</ul>"
        if caveats
        else "<p>It repeats the run's seed and every option (a new run directory; the nemesis "
        "schedule is planned from the seed).</p>"
    )
    return (
        f'<p class="seed">Seed: <b>{manifest.seed}</b> ({how}) · run '
        f"<code>{escape(manifest.run_id)}</code></p>"
        f"<h3>Replay</h3><pre class=\"replay\"><code>{escape(shlex.join(manifest.replay))}"
        f"</code></pre>{exact}<h3>Options</h3>{_options_table(manifest)}"
    )
